"""Revision 0023 on SQLite and PostgreSQL: a resolved or closed ticket loses the SLA due
time an older version stored for it (a first response that breached unmet), its breach
time stays, and an open ticket's due time is left alone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from ticket_server import db
from ticket_server.settings import Settings

DUE = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
BREACH = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


async def _sql(url: str, sql: str, **params: Any) -> list[Any]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(sql), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        await engine.dispose()


async def test_0023_clears_the_due_time_of_done_tickets_only(empty_database_url: str) -> None:
    from ticket_server.admin.seeding import seed

    url = empty_database_url
    await asyncio.to_thread(db.upgrade, url)
    await seed(Settings(database_url=url))
    picked = {
        status: (await _sql(url, "SELECT id FROM tickets WHERE status = :s ORDER BY id", s=status))[
            0
        ][0]
        for status in ("open", "resolved", "closed")
    }
    # What an older version stored: a due time on every one of them.
    for ticket_id in picked.values():
        await _sql(
            url,
            "UPDATE tickets SET sla_covered = :yes, sla_due_at = :due, sla_breach_at = :breach "
            "WHERE id = :id",
            yes=True,
            due=DUE,
            breach=BREACH,
            id=ticket_id,
        )
    await asyncio.to_thread(db.downgrade, url, "0022_sla_plan_targets")
    await asyncio.to_thread(db.upgrade, url)
    rows = {
        r[0]: (r[1], r[2])
        for r in await _sql(
            url,
            "SELECT id, sla_due_at, sla_breach_at FROM tickets WHERE id IN (:a, :b, :c)",
            a=picked["open"],
            b=picked["resolved"],
            c=picked["closed"],
        )
    }
    assert rows[picked["open"]][0] is not None  # left alone
    for status in ("resolved", "closed"):
        due_at, breach_at = rows[picked[status]]
        assert due_at is None, status
        assert breach_at is not None, status
