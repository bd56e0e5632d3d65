"""The ticket tallies ``count_tickets`` reads (revision 0026: ``ticket_counts`` plus
``ticket_count_deltas``, kept by triggers) equal a count over the tickets after every
kind of change: by the server's tools, and by plain SQL as another version would write
(insert, delete, an update of each counted column, an update that changes nothing
counted); before the deltas are folded and after; and after the revision computes them
for existing tickets. On both engines."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from sqlalchemy import create_engine, event

from tests.access.conftest import add_caller, server_as  # noqa: F401  (fixtures)
from tests.test_operator_cli import run
from tests.tools.test_write_guarantees import _execute
from tests.tools.test_writes import _sql
from ticket_server import db
from ticket_server.db import open_repository
from ticket_server.settings import Settings
from ticket_server.tickets import counts
from ticket_server.tickets.domain import OPEN_STATUSES
from ticket_server.tickets.search import SearchFilters
from ticket_server.tickets.sla_store import AGE_BUCKETS

RECOUNT = (
    "SELECT status, queue, priority, coalesce(owner, ''), count(*), count(sla_covered), "
    "sum(CASE WHEN sla_covered = false THEN 1 ELSE 0 END), count(sla_breach_at) "
    "FROM tickets GROUP BY status, queue, priority, coalesce(owner, '')"
)
TALLIED = (
    "SELECT status, queue, priority, owner, sum(tickets), sum(covered), sum(without_sla), "
    "sum(breaching) FROM (SELECT * FROM ticket_counts UNION ALL "
    "SELECT status, queue, priority, owner, tickets, covered, without_sla, breaching "
    "FROM ticket_count_deltas) AS t GROUP BY status, queue, priority, owner "
    "HAVING sum(tickets) <> 0 OR sum(covered) <> 0 OR sum(without_sla) <> 0 "
    "OR sum(breaching) <> 0"
)


async def _drift(settings: Settings) -> set[tuple[Any, ...]]:
    """The groups whose tallies differ from a count over the tickets (both sides)."""
    recount = {
        tuple(str(v) for v in r[:4]) + tuple(int(v) for v in r[4:])
        for r in await _sql(settings, RECOUNT)
    }
    tallied = {
        tuple(str(v) for v in r[:4]) + tuple(int(v) for v in r[4:])
        for r in await _sql(settings, TALLIED)
    }
    return recount ^ tallied


async def _fold(settings: Settings) -> None:
    repo = open_repository(settings)
    try:
        await repo.fold_deltas()
    finally:
        await repo.aclose()


def _first(where: str, n: int) -> str:
    return f"pk IN (SELECT pk FROM tickets WHERE {where} ORDER BY pk LIMIT {n})"


async def test_plain_sql_changes_are_tallied_before_and_after_the_fold(settings: Settings) -> None:
    # Seeding folds what its inserts appended (else every count reads them all).
    assert (await _sql(settings, "SELECT count(*) FROM ticket_count_deltas"))[0][0] == 0
    assert await _drift(settings) == set()
    await _execute(
        settings,
        [
            "UPDATE tickets SET status = 'resolved' WHERE " + _first("status = 'open'", 5),
            "UPDATE tickets SET owner = NULL WHERE " + _first("owner IS NOT NULL", 3),
            "UPDATE tickets SET owner = 'x.new', queue = 'support', priority = 'urgent' "
            "WHERE " + _first("queue = 'billing'", 4),
            "UPDATE tickets SET sla_covered = NULL, sla_breach_at = NULL "
            "WHERE " + _first("sla_covered IS NOT NULL", 2),
            # The sample has no policy: no ticket is covered or has a breach moment yet.
            "UPDATE tickets SET sla_covered = true, sla_breach_at = updated_at WHERE "
            + _first("status = 'open'", 9),
            "UPDATE tickets SET sla_breach_at = NULL WHERE "
            + _first("sla_breach_at IS NOT NULL", 2),
            "UPDATE tickets SET sla_covered = false, sla_breach_at = NULL WHERE "
            + _first("sla_covered = true", 1),
            "UPDATE tickets SET sla_covered = NULL WHERE " + _first("sla_covered = true", 1),
            "UPDATE tickets SET status = status, subject = subject || '.' WHERE "
            + _first("1 = 1", 20),
            "INSERT INTO tickets (id, subject, body, status, priority, owner, queue, customer, "
            "created_at, updated_at) SELECT 'SUP-TALLY1', subject, body, 'new', 'low', NULL, queue, "
            "customer, created_at, updated_at FROM tickets WHERE " + _first("1 = 1", 1),
            "INSERT INTO tickets (id, subject, body, status, priority, owner, queue, customer, "
            "created_at, updated_at) SELECT 'SUP-TALLY2', subject, body, 'open', 'high', 'a.b', "
            "queue, customer, created_at, updated_at FROM tickets WHERE " + _first("1 = 1", 1),
        ],
    )
    await _execute(settings, ["DELETE FROM tickets WHERE id = 'SUP-TALLY2'"])
    assert (await _sql(settings, "SELECT count(*) FROM ticket_count_deltas"))[0][0] > 0
    assert await _drift(settings) == set()
    await _fold(settings)
    assert (await _sql(settings, "SELECT count(*) FROM ticket_count_deltas"))[0][0] == 0
    assert await _drift(settings) == set()


async def test_the_tools_writes_are_tallied(settings: Settings, add_caller, server_as) -> None:
    await add_caller("lead", scopes=("tickets:read", "tickets:write"))
    rows = await _sql(settings, "SELECT id FROM tickets WHERE " + _first("status = 'open'", 6))
    ids = [r[0] for r in rows]
    server = server_as(
        stdio_caller="lead", toolsets=["read", "respond", "triage", "related"], confirm_writes=[]
    )
    async with Client(server) as client:
        await client.call_tool("set_ticket_status", {"ticket_id": ids[0], "status": "resolved"})
        await client.call_tool("assign_ticket", {"ticket_id": ids[1], "owner": "someone"})
        change = {"ticket_ids": ids[2:], "priority": "urgent", "owner": "n.haddad"}
        plan = (await client.call_tool("bulk_update_tickets", change)).structured_content
        await client.call_tool(
            "bulk_update_tickets",
            {**change, "dry_run": False, "plan_token": plan["plan_token"], "idempotency_key": "t"},
        )
    assert (await _sql(settings, "SELECT count(*) FROM ticket_count_deltas"))[0][0] >= 2 * 6
    assert await _drift(settings) == set()


async def test_the_revision_tallies_existing_tickets(settings: Settings) -> None:
    url = settings.database_url
    await asyncio.to_thread(db.downgrade, url, "0025_sqlite_count_integers")
    await _execute(
        settings,
        [
            "UPDATE tickets SET owner = 'before.0026' WHERE " + _first("1 = 1", 7),
            "UPDATE tickets SET sla_covered = true, sla_breach_at = updated_at WHERE "
            + _first("1 = 1", 5),
            "UPDATE tickets SET sla_covered = true WHERE " + _first("sla_covered = false", 3),
        ],
    )
    await asyncio.to_thread(db.upgrade, url)
    assert (await _sql(settings, "SELECT count(*) FROM ticket_count_deltas"))[0][0] == 0
    assert await _drift(settings) == set()
    tallied = "SELECT sum(tickets), sum(without_sla), sum(breaching) FROM ticket_counts"
    tickets, without_sla, breaching = (await _sql(settings, tallied))[0]
    assert (tickets - without_sla, breaching) == (8, 5)  # the sample: no target covers any


async def test_db_reindex_counts_the_tickets_again_when_the_tallies_are_off(
    settings: Settings,
) -> None:
    """Tallies written around the triggers (by hand here) are mended by ``db reindex``,
    which says how many groups were off, and finds none the second time."""
    await _execute(
        settings,
        [
            "UPDATE ticket_counts SET tickets = tickets + 5 WHERE " + _first_group("'open'"),
            "INSERT INTO ticket_count_deltas (status, queue, priority, owner, tickets, covered, "
            "without_sla, breaching) VALUES ('new', 'billing', 'low', 'ghost', 1, 1, 1, 0)",
        ],
    )
    assert len({group[:4] for group in await _drift(settings)}) == 2
    first = run(settings.database_url, "db", "reindex")
    assert first.returncode == 0, first.stderr
    assert "counted the tickets again for the counts: 2 groups were off" in first.stderr
    assert await _drift(settings) == set()
    assert (await _sql(settings, "SELECT count(*) FROM ticket_count_deltas"))[0][0] == 0
    again = run(settings.database_url, "db", "reindex")
    assert "counted the tickets again for the counts: 0 groups were off" in again.stderr


def _first_group(status: str) -> str:
    return (
        "(status, queue, priority, owner) IN (SELECT status, queue, priority, owner "
        f"FROM ticket_counts WHERE status = {status} ORDER BY queue, priority, owner LIMIT 1)"
    )


@pytest.mark.sqlite_only
def test_sqlite_reads_the_tickets_the_clock_moves_from_their_indexes(db_path: Path) -> None:
    """SQLite's planner would read the tickets younger than 30 days and those whose
    clock runs through ``ix_tickets_counts`` (every open ticket, in the groups' order)
    without the hint ``counts.count`` gives it; with it, each part is a range of its
    own index, read alone."""
    engine = create_engine(f"sqlite:///{db_path}")
    plans: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def explain(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if "ticket_count_deltas" in statement:
            rows = cursor.connection.execute("EXPLAIN QUERY PLAN " + statement, parameters)
            plans.append("\n".join(str(r[-1]) for r in rows))

    now = datetime.now(UTC)
    bounds = [bound for _, bound in AGE_BUCKETS if bound is not None]
    filters = SearchFilters(statuses=tuple(sorted(OPEN_STATUSES)))
    try:
        with engine.connect() as conn:
            counts.count(conn, filters, ["queue", "status"], now, bounds)
    finally:
        engine.dispose()
    assert len(plans) == 1, plans
    assert "COVERING INDEX ix_tickets_created_at (created_at>?)" in plans[0], plans[0]
    assert "COVERING INDEX ix_tickets_sla_breach_at (sla_breach_at>?)" in plans[0], plans[0]
    assert "ix_tickets_counts" not in plans[0], plans[0]
