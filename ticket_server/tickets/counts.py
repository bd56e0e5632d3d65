"""``count_tickets``' tallies without reading every ticket it counts (revision 0026).

A group's numbers that do not move with the clock (how many tickets, how many with SLA
columns derived, how many no target covers, how many with a breach moment) are kept by
triggers: ``ticket_counts`` plus the ``ticket_count_deltas`` not folded yet
(``tickets.folding``). What moves with the clock is read from the tickets it concerns,
through indexes that hold every column the read needs:

- the age buckets from the tickets younger than the oldest bound (``ix_tickets_created_at``);
  every older ticket is in the last bucket;
- the breach count as the tickets with a breach moment less those whose moment is still
  ahead (``ix_tickets_sla_breach_at``): a clock running towards a target.

So a count's cost follows the tickets created lately and the clocks running, not the
backlog. All four parts are one statement: one snapshot on both engines.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, func, literal, literal_column, select, union_all

from ticket_server.tickets.folding import FOLD_ROWS, fold, has_deltas
from ticket_server.tickets.models import Ticket, TicketCount, TicketCountDelta
from ticket_server.tickets.search import SearchFilters

_T, _COUNTS, _DELTAS = Ticket.__table__, TicketCount.__table__, TicketCountDelta.__table__
TALLIES = ("tickets", "covered", "without_sla", "breaching")
KEYS = ("status", "queue", "priority", "owner")

_TALLIED_FILTERS = frozenset({"statuses", "priorities", "queue", "owner", "queues"})


def tallied(filters: SearchFilters, keys: list[str]) -> bool:
    """Whether the tallies answer a count by ``keys`` of what ``filters`` select: they
    hold the group's columns only (no tags, no due time)."""
    return set(keys) <= set(KEYS) and all(
        getattr(filters, f.name) is None for f in fields(filters) if f.name not in _TALLIED_FILTERS
    )


def count(
    conn: Connection,
    filters: SearchFilters,
    keys: list[str],
    now: datetime,
    bounds: list[timedelta],
) -> list[Any]:
    """Per group of ``keys`` (a ``tallied`` count): rows of ``n``, ``younger_{i}`` (the
    tickets created after ``now - bounds[i]``), ``late`` (breached at ``now``),
    ``without`` (no target covers) and ``covered`` (SLA columns derived)."""
    zero = literal(0)
    young = [zero.label(f"younger_{i}") for i in range(len(bounds))]

    def tally(table: Any) -> Any:
        columns = [table.c[k] for k in keys]
        return select(*columns, *(table.c[t] for t in TALLIES), *young, zero.label("ahead"))

    # SQLite's planner would read these parts through ix_tickets_counts (every open
    # ticket, in the groups' order) rather than through the range of their own index: on
    # SQLite the filters test `+column`, which no index serves, and the range is said to
    # hold few rows (`likelihood`, a planner hint SQLite documents).
    sqlite = conn.dialect.name == "sqlite"
    tested: Any = _T.c
    if sqlite:
        tested = SimpleNamespace(**{k: literal_column(f"+tickets.{k}", _T.c[k].type) for k in KEYS})

    def tickets(*columns: Any, where: Any) -> Any:
        group = [func.coalesce(_T.c.owner, "") if k == "owner" else _T.c[k] for k in keys]
        if sqlite:
            where = func.likelihood(where, literal_column("0.001"))
        return (
            select(*(g.label(k) for g, k in zip(group, keys, strict=True)), *columns)
            .where(*filters.conditions(tested), where)
            .group_by(*group)
        )

    parts = [
        tally(_COUNTS).where(*filters.conditions(_COUNTS.c)),
        tally(_DELTAS).where(*filters.conditions(_DELTAS.c)),
        tickets(
            *(zero.label(t) for t in TALLIES),
            *(
                func.count().filter(_T.c.created_at > now - b).label(f"younger_{i}")
                for i, b in enumerate(bounds)
            ),
            zero.label("ahead"),
            where=_T.c.created_at > now - bounds[-1],
        ),
        tickets(
            *(zero.label(t) for t in TALLIES),
            *young,
            func.count().label("ahead"),
            where=_T.c.sla_breach_at > now,
        ),
    ]
    both = union_all(*parts).subquery()
    group = [func.nullif(both.c[k], "").label(k) if k == "owner" else both.c[k] for k in keys]
    stmt = select(
        *group,
        func.sum(both.c.tickets).label("n"),
        *(func.sum(both.c[f"younger_{i}"]).label(f"younger_{i}") for i in range(len(bounds))),
        (func.sum(both.c.breaching) - func.sum(both.c.ahead)).label("late"),
        func.sum(both.c.without_sla).label("without"),
        func.sum(both.c.covered).label("covered"),
    ).group_by(*(both.c[k] for k in keys))
    return list(conn.execute(stmt).mappings())


def fold_count_deltas(conn: Connection, limit: int = FOLD_ROWS) -> int:
    """Add up to ``limit`` of the oldest ``ticket_count_deltas`` rows to
    ``ticket_counts`` and remove them (``folding.fold``); returns how many rows."""
    return fold(conn, "ticket_count_deltas", "ticket_counts", KEYS, TALLIES, limit)


def has_count_deltas(conn: Connection) -> bool:
    return has_deltas(conn, "ticket_count_deltas")


def recount(conn: Connection) -> int:
    """The ticket tallies counted again from the tickets (``db reindex``), in the caller's
    transaction, writes to ``tickets`` held off meanwhile (PostgreSQL: a table lock;
    SQLite: the write transaction). Returns how many groups were off: none unless the
    triggers were bypassed (dropped by hand, or a restore that left them out)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("LOCK TABLE tickets IN SHARE ROW EXCLUSIVE MODE")
        conn.exec_driver_sql("LOCK TABLE ticket_counts, ticket_count_deltas IN EXCLUSIVE MODE")
    group = [_T.c.status, _T.c.queue, _T.c.priority, func.coalesce(_T.c.owner, "")]
    counted = select(
        *group,
        func.count(),
        func.count(_T.c.sla_covered),
        func.count().filter(_T.c.sla_covered.is_(False)),
        func.count(_T.c.sla_breach_at),
    ).group_by(*group)
    both = union_all(
        select(*(_COUNTS.c[c] for c in (*KEYS, *TALLIES))),
        select(*(_DELTAS.c[c] for c in (*KEYS, *TALLIES))),
    ).subquery()
    kept = select(*(both.c[k] for k in KEYS), *(func.sum(both.c[t]) for t in TALLIES)).group_by(
        *(both.c[k] for k in KEYS)
    )

    def groups(stmt: Any) -> set[tuple[Any, ...]]:
        rows = conn.execute(stmt)
        return {(*(str(v) for v in r[:4]), *(int(v) for v in r[4:])) for r in rows if any(r[4:])}

    off = {r[:4] for r in groups(counted) ^ groups(kept)}
    conn.execute(_DELTAS.delete())
    conn.execute(_COUNTS.delete())
    conn.execute(_COUNTS.insert().from_select([*KEYS, *TALLIES], counted))
    return len(off)
