"""Migrations, seeding and database faults (C05 b)."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest
from fastmcp import Client

from tests.helpers import assert_no_leak, text_of
from ticket_server import db
from ticket_server.admin.conversations import generate_conversations, generate_customers
from ticket_server.admin.generator import generate_tickets
from ticket_server.admin.seeding import (
    SAMPLE_COUNT,
    SAMPLE_FILE,
    SAMPLE_FILES,
    read_jsonl,
    read_records,
    seed,
)
from ticket_server.settings import Settings


async def schema(url: str) -> set[str]:
    """Tables and indexes in the database at ``url``."""
    from sqlalchemy import inspect
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:

            def names(sync) -> set[str]:
                inspector = inspect(sync)
                out = set(inspector.get_table_names())
                for table in out.copy():
                    out |= {i["name"] for i in inspector.get_indexes(table)}
                return out

            return await conn.run_sync(names)
    finally:
        await engine.dispose()


def test_migrations_upgrade_downgrade_upgrade(empty_database_url: str) -> None:
    """Every revision upgrades from empty, downgrades to base and upgrades again."""
    url = empty_database_url
    db.upgrade(url)
    assert {"tickets", "ix_tickets_updated_at", "alembic_version"} <= asyncio.run(schema(url))
    state = asyncio.run(db.migration_state(Settings(database_url=url)))
    assert state.is_current and state.current == db.head_revision(url)
    db.downgrade(url, "base")
    assert "tickets" not in asyncio.run(schema(url))
    db.upgrade(url)
    assert "tickets" in asyncio.run(schema(url))


def test_start_up_migration_check_agrees_with_alembic(empty_database_url: str) -> None:
    """`serve`'s start-up check sees a database that is behind the code's head."""
    url = empty_database_url
    db.upgrade(url, "0002_search")
    state = asyncio.run(db.migration_state(Settings(database_url=url)))
    assert state.current == "0002_search" and not state.is_current
    db.upgrade(url)
    assert asyncio.run(db.migration_state(Settings(database_url=url))).is_current


def test_sample_file_is_the_generators_output() -> None:
    """seed/tickets.jsonl is exactly generate_tickets(SAMPLE_COUNT): the note in seed/ holds."""
    from_file = list(read_jsonl(SAMPLE_FILE))
    assert len(from_file) == SAMPLE_COUNT >= 2000
    assert from_file == list(generate_tickets(SAMPLE_COUNT))


def test_sample_conversations_are_the_generators_output() -> None:
    """seed/customers.jsonl, comments.jsonl and events.jsonl are exactly the generators'
    output for the sample: every ticket's customer has a record, long threads and
    non-ASCII comments exist, and SUP-4412's history ends in its status."""
    generated = list(generate_conversations(SAMPLE_COUNT))
    assert list(read_records(SAMPLE_FILES["customers"])) == generate_customers()
    assert list(read_records(SAMPLE_FILES["comments"])) == [c for _, cs, _ in generated for c in cs]
    assert list(read_records(SAMPLE_FILES["events"])) == [e for _, _, es in generated for e in es]
    names = {c["name"] for c in generate_customers()}
    assert all(t["customer"] in names for t, _, _ in generated)
    assert max(len(cs) for _, cs, _ in generated) >= 20
    assert any(not c["body"].isascii() for _, cs, _ in generated for c in cs)
    ticket, _, events = next(row for row in generated if row[0]["id"] == "SUP-4412")
    assert events[-1]["new_value"] == ticket["status"] == "waiting_on_customer"
    assert events[-1]["created_at"] == ticket["updated_at"]


def test_seed_if_empty_is_idempotent(settings: Settings) -> None:
    from ticket_server.db import open_repository

    assert asyncio.run(seed(settings, if_empty=True)) == 0

    async def count() -> int:
        repo = open_repository(settings)
        try:
            return await repo.count()
        finally:
            await repo.aclose()

    assert asyncio.run(count()) == SAMPLE_COUNT


async def test_c05b_database_stops_answering_then_comes_back(
    server, db_path: Path, tmp_path: Path
) -> None:
    """C05 (b): the SQLite file replaced by garbage, then removed, then restored: calls in
    between answer "unavailable" within seconds, without internals; then succeed again."""
    backup = tmp_path / "backup.db"
    shutil.copy(db_path, backup)
    async with Client(server) as client:
        ok = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert ok.is_error is False

        db_path.write_bytes(b"this is not a database" * 100)
        started = time.monotonic()
        broken = await client.call_tool(
            "get_ticket_status", {"ticket_id": "SUP-4412"}, raise_on_error=False
        )
        assert time.monotonic() - started < 10
        assert broken.is_error is True
        assert "ticket database is unavailable" in text_of(broken)
        assert_no_leak(text_of(broken))

        db_path.unlink()
        gone = await client.call_tool("search_tickets", {"query": "invoice"}, raise_on_error=False)
        assert gone.is_error is True and "unavailable" in text_of(gone)
        assert not db_path.exists(), "serving must never create an empty database file"

        shutil.copy(backup, db_path)
        back = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert back.is_error is False
        assert back.structured_content["status"] == "waiting_on_customer"


@pytest.mark.sqlite_only
async def test_callers_store_connections_keep_a_small_page_cache(settings: Settings) -> None:
    """The callers store's connections cap SQLite's page cache (its audit pages are
    written once and never read back); the tickets' connections keep SQLite's default."""
    from sqlalchemy import text

    from ticket_server.access.callers import STORE_PAGE_CACHE_KIB, open_store

    store = open_store(settings)
    tickets = db.create_engine(settings)
    try:
        async with store.engine.connect() as conn:
            assert (await conn.scalar(text("PRAGMA cache_size"))) == -STORE_PAGE_CACHE_KIB
        async with tickets.connect() as conn:
            assert (await conn.scalar(text("PRAGMA cache_size"))) == -2000
    finally:
        await store.engine.dispose()
        await tickets.dispose()
