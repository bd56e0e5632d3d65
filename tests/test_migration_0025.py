"""Revision 0025 on SQLite: `created_at_us` and `sla_breach_at_us` hold the moments of
`created_at` and `sla_breach_at` in microseconds, for every row the revision converted,
every row inserted after it and every update of either timestamp, whoever writes (here
the seeding through the models, and plain SQL as an older version would write)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ticket_server import db

pytestmark = pytest.mark.sqlite_only

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _microseconds(text: str | None) -> int | None:
    if text is None:
        return None
    return (datetime.fromisoformat(text).replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)


def _mismatches(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT id, created_at, created_at_us, sla_breach_at, sla_breach_at_us FROM tickets"
        ).fetchall()
    assert rows
    return [
        row for row in rows if (row[2], row[4]) != (_microseconds(row[1]), _microseconds(row[3]))
    ]


def test_the_integer_copies_follow_the_timestamps(db_path: Path) -> None:
    """At the latest revision both triggers are there: a later revision that rebuilds
    ``tickets`` (Alembic's batch mode copies the table) would drop them silently, and the
    copies would go stale with no error."""
    with sqlite3.connect(db_path) as conn:
        triggers = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
    assert {"tickets_times_ai", "tickets_times_au"} <= triggers
    assert _mismatches(db_path) == []  # the seeded sample, inserted through the models
    with sqlite3.connect(db_path) as conn:
        first, second = (r[0] for r in conn.execute("SELECT pk FROM tickets LIMIT 2"))
        # The last microsecond of a second: SQLite's date functions would round it up.
        conn.execute(
            "UPDATE tickets SET created_at = '2026-12-04 10:00:59.999999', "
            "sla_breach_at = '2026-12-05 08:00:00' WHERE pk = ?",
            (first,),
        )
        conn.execute("UPDATE tickets SET sla_breach_at = NULL WHERE pk = ?", (second,))
        copies = dict(
            conn.execute(
                "SELECT pk, created_at_us FROM tickets WHERE pk IN (?, ?)", (first, second)
            ).fetchall()
        )
    assert copies[first] == _microseconds("2026-12-04 10:00:59.999999")
    assert _mismatches(db_path) == []


def test_0025_converts_existing_rows_and_goes_back(db_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{db_path}"
    db.downgrade(url, "0024_counts_heap_order")
    with sqlite3.connect(db_path) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(tickets)")}
        assert "created_at_us" not in columns
        conn.execute("UPDATE tickets SET created_at = '2025-01-01 00:00:00.5' WHERE pk = 1")
    db.upgrade(url)
    assert _mismatches(db_path) == []
