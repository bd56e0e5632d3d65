"""Migrations, seeding and database faults (C05 b)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from pathlib import Path

from fastmcp import Client

from ticket_server import db
from ticket_server.settings import Settings
from ticket_server.tickets.generator import generate_tickets
from ticket_server.tickets.seeding import SAMPLE_COUNT, SAMPLE_FILE, read_jsonl, seed
from tests.conftest import sqlite_url
from tests.helpers import assert_no_leak, text_of


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','index')")}


def test_migrations_upgrade_downgrade_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    url = sqlite_url(path)
    db.upgrade(url)
    assert {"tickets", "ix_tickets_updated_at", "alembic_version"} <= tables(path)
    state = asyncio.run(db.migration_state(Settings(database_url=url)))
    assert state.is_current and state.current == db.head_revision(url)
    db.downgrade(url, "base")
    assert "tickets" not in tables(path)
    db.upgrade(url)
    assert "tickets" in tables(path)


def test_sample_file_is_the_generators_output() -> None:
    """seed/tickets.jsonl is exactly generate_tickets(SAMPLE_COUNT): the note in seed/ holds."""
    from_file = list(read_jsonl(SAMPLE_FILE))
    assert len(from_file) == SAMPLE_COUNT >= 2000
    assert from_file == list(generate_tickets(SAMPLE_COUNT))


def test_seed_if_empty_is_idempotent(template_db: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    shutil.copy(template_db, path)
    settings = Settings(database_url=sqlite_url(path))
    assert asyncio.run(seed(settings, if_empty=True)) == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM tickets").fetchone()[0] == SAMPLE_COUNT


async def test_c05b_database_stops_answering_then_comes_back(server, db_path: Path, tmp_path: Path) -> None:
    """C05 (b): the SQLite file replaced by garbage, then removed, then restored: calls in
    between answer "unavailable" within seconds, without internals; then succeed again."""
    backup = tmp_path / "backup.db"
    shutil.copy(db_path, backup)
    async with Client(server) as client:
        ok = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert ok.is_error is False

        db_path.write_bytes(b"this is not a database" * 100)
        started = time.monotonic()
        broken = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"}, raise_on_error=False)
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
