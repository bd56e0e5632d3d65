"""Counts kept as a table of totals plus a table of deltas: writes append deltas (an
insert takes no lock another writer waits on), and a fold adds them to the totals
outside any write's transaction. Readers add both, so their numbers stay exact between
folds. Used by the search word counts (``search_terms``) and the ticket tallies of
``count_tickets`` (``ticket_counts``)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection
from sqlalchemy import text as sql

FOLD_ROWS = 20_000
"""Deltas folded per transaction."""


def fold(
    conn: Connection,
    deltas: str,
    totals: str,
    keys: tuple[str, ...],
    values: tuple[str, ...],
    limit: int = FOLD_ROWS,
) -> int:
    """Add up to ``limit`` of the oldest rows of table ``deltas`` (a ``pk``, ``keys``,
    ``values``) to the rows of ``totals`` with the same ``keys`` (its primary key), and
    remove them, in the caller's transaction (of its own: it locks the totals' rows until
    it commits). Returns how many rows were folded.

    PostgreSQL: one statement takes the rows with ``FOR UPDATE SKIP LOCKED`` and adds
    exactly the rows it deleted, so replicas folding at once take disjoint rows and a
    delta committed meanwhile is left for the next fold. SQLite has one writer at a
    time: run in a write transaction (``TicketRepository.transaction``: ``BEGIN
    IMMEDIATE``), the rows are summed, then deleted, with no other writer between."""
    key, columns = ", ".join(keys), ", ".join((*keys, *values))
    sums = ", ".join(f"sum({v})" for v in values)
    upsert = f"ON CONFLICT ({key}) DO UPDATE SET " + ", ".join(
        f"{v} = {totals}.{v} + excluded.{v}" for v in values
    )
    if conn.dialect.name == "postgresql":
        moved = conn.execute(
            sql(
                f"WITH moved AS (DELETE FROM {deltas} WHERE pk IN ("
                f"SELECT pk FROM {deltas} ORDER BY pk LIMIT :limit "
                f"FOR UPDATE SKIP LOCKED) RETURNING {columns}), "
                f"summed AS (INSERT INTO {totals} ({columns}) "
                f"SELECT {key}, {sums} FROM moved GROUP BY {key} "
                f"ORDER BY {key} {upsert} RETURNING 1) "
                "SELECT (SELECT count(*) FROM moved)"
            ),
            {"limit": limit},
        ).scalar_one()
        return int(moved)
    last = conn.execute(
        sql(f"SELECT max(pk), count(*) FROM (SELECT pk FROM {deltas} ORDER BY pk LIMIT :limit)"),
        {"limit": limit},
    ).one()
    if last[0] is None:
        return 0
    conn.execute(
        sql(
            f"INSERT INTO {totals} ({columns}) SELECT {key}, {sums} "
            f"FROM {deltas} WHERE pk <= :last GROUP BY {key} {upsert}"
        ),
        {"last": last[0]},
    )
    conn.execute(sql(f"DELETE FROM {deltas} WHERE pk <= :last"), {"last": last[0]})
    return int(last[1])


def has_deltas(conn: Connection, deltas: str) -> bool:
    """Whether any row of table ``deltas`` waits to be folded."""
    return conn.execute(sql(f"SELECT 1 FROM {deltas} LIMIT 1")).first() is not None


def fold_all(conn: Connection, step: Callable[[Connection], int]) -> int:
    """``step`` (a fold) until none is left, in the caller's transaction (for one writer
    alone, such as seeding, or a rewrite of every ticket); returns how many rows."""
    folded = 0
    while (done := step(conn)) > 0:
        folded += done
    return folded
