"""Revision 0012 (queues and requesters as tables) on a database seeded at 0011, on SQLite
and PostgreSQL: every ticket keeps its queue and customer values, each queue and
organisation the tickets name has its row (an organisation without one gets one), the
references hold, and on SQLite the copied tickets table keeps its full-text triggers.
Then down to 0011 and up again."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

from ticket_server import db
from ticket_server.tickets.search import search_columns

ROOT = Path(__file__).resolve().parents[1]
TICKETS = 600  # of the sample, every queue among them


def _records(name: str, count: int | None = None) -> list[dict[str, Any]]:
    with (ROOT / "seed" / f"{name}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in islice(fh, count)]


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def _run(url: str, statements: list[tuple[str, Any]]) -> list[list[Any]]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    out: list[list[Any]] = []
    try:
        async with engine.begin() as conn:
            for sql, params in statements:
                result = await conn.execute(text(sql), params)
                out.append(list(result.all()) if result.returns_rows else [])
    finally:
        await engine.dispose()
    return out


async def test_0012_keeps_every_tickets_queue_and_customer(empty_database_url: str) -> None:
    url = empty_database_url
    await asyncio.to_thread(db.upgrade, url, "0011_cancelled_outcome")
    tickets = _records("tickets", TICKETS)
    # Today's tickets may name an organisation without a customers row (a file's tickets
    # did): leave ten out, and one queue spelt with capitals as a file could.
    customers = [
        c for c in _records("customers") if c["name"] not in {t["customer"] for t in tickets[:10]}
    ]
    tickets[0]["queue"] = "Billing-EU"
    rows = [
        {
            **t,
            "created_at": _at(t["created_at"]),
            "updated_at": _at(t["updated_at"]),
            **search_columns(t["subject"], t["body"]),
        }
        for t in tickets
    ]
    cust = [{**c, "created_at": _at(c["created_at"])} for c in customers]
    sqlite = url.startswith("sqlite")
    if sqlite:  # the engine stores naive UTC there (models.UTCDateTime)
        rows = [
            {
                **r,
                "created_at": r["created_at"].replace(tzinfo=None),
                "updated_at": r["updated_at"].replace(tzinfo=None),
            }
            for r in rows
        ]
        cust = [{**c, "created_at": c["created_at"].replace(tzinfo=None)} for c in cust]
    await _run(
        url,
        [
            (
                "INSERT INTO customers (id, name, plan, region, billing_reference, created_at) "
                "VALUES (:id, :name, :plan, :region, :billing_reference, :created_at)",
                cust,
            ),
            (
                "INSERT INTO tickets (id, subject, body, status, priority, owner, queue, customer, "
                "created_at, updated_at, search_subject, search_body) VALUES (:id, :subject, "
                ":body, :status, :priority, :owner, :queue, :customer, :created_at, :updated_at, "
                ":search_subject, :search_body)",
                rows,
            ),
        ],
    )
    select_tickets = "SELECT id, queue, customer FROM tickets ORDER BY id"
    (before,) = await _run(url, [(select_tickets, {})])
    assert len(before) == TICKETS

    await asyncio.to_thread(db.upgrade, url)

    after, queues, orgs, dangling, made = await _run(
        url,
        [
            (select_tickets, {}),
            ("SELECT name, display_name, time_zone, active FROM queues ORDER BY name", {}),
            ("SELECT name FROM customers", {}),
            (
                "SELECT count(*) FROM tickets t WHERE NOT EXISTS (SELECT 1 FROM queues q "
                "WHERE q.name = t.queue) OR NOT EXISTS (SELECT 1 FROM customers c WHERE "
                "c.name = t.customer) OR requester_id IS NOT NULL",
                {},
            ),
            ("SELECT name, plan FROM customers WHERE plan = 'unknown' ORDER BY name", {}),
        ],
    )
    assert [tuple(r) for r in after] == [tuple(r) for r in before]
    assert {q[0] for q in queues} == {t["queue"] for t in tickets}
    assert ("Billing-EU", "Billing EU", "UTC") in [tuple(q)[:3] for q in queues]
    assert all(bool(q[3]) for q in queues)
    assert {t["customer"] for t in tickets} <= {o[0] for o in orgs}
    assert dangling[0][0] == 0
    assert {m[0] for m in made} == {t["customer"] for t in tickets[:10]}
    if sqlite:
        (triggers,) = await _run(
            url,
            [
                (
                    "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'tickets'",
                    {},
                )
            ],
        )
        # 0012 rebuilt the table (batch mode) and made its search triggers again; the
        # later revisions' triggers (0025's timestamp copies, 0026's tallies) are there
        # as well.
        assert {t[0] for t in triggers} == {
            "tickets_fts_ai",
            "tickets_fts_ad",
            "tickets_fts_au",
            "tickets_times_ai",
            "tickets_times_au",
            "tickets_counts_ai",
            "tickets_counts_ad",
            "tickets_counts_au",
        }
    await asyncio.to_thread(db.downgrade, url, "0011_cancelled_outcome")
    (down,) = await _run(url, [(select_tickets, {})])
    assert [tuple(r) for r in down] == [tuple(r) for r in before]
    await asyncio.to_thread(db.upgrade, url)
