"""SLA storage and the reads built on it: the policy tables, the facts a ticket's SLA
state is derived from (``tickets.sla``), and exact counts of tickets by group, age and
SLA breach. Functions of a synchronous SQLAlchemy ``Connection``, run by the
repository's ``read`` / ``transaction``; filters are ``tickets.search.SearchFilters``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, case, delete, func, insert, literal, select

from ticket_server.tickets.domain import (
    AuthorType,
    EventField,
    TicketPriority,
    TicketStatus,
    Visibility,
)
from ticket_server.tickets.models import Comment, SlaCalendar, SlaTarget, Ticket, TicketEvent
from ticket_server.tickets.search import SearchFilters
from ticket_server.tickets.sla import (
    Change,
    Policy,
    SlaState,
    TicketFacts,
    policy_from_rows,
    policy_rows,
    sla_state,
)

_T, _E, _C = Ticket.__table__, TicketEvent.__table__, Comment.__table__
_CAL, _TGT = SlaCalendar.__table__, SlaTarget.__table__

GROUPS = ("queue", "status", "priority", "owner")
AGE_BUCKETS: tuple[tuple[str, timedelta | None], ...] = (
    ("under_1d", timedelta(days=1)),
    ("1d_to_3d", timedelta(days=3)),
    ("3d_to_7d", timedelta(days=7)),
    ("7d_to_30d", timedelta(days=30)),
    ("over_30d", None),
)
"""Age since creation: each bucket holds tickets younger than its bound (and not younger
than the bucket before)."""
SLA_COUNT_LIMIT = 5_000
"""The most tickets one count derives SLA states for; beyond, breach counts are null."""


def load_policy(conn: Connection) -> Policy:
    return policy_from_rows(
        [dict(r) for r in conn.execute(select(_CAL)).mappings()],
        [dict(r) for r in conn.execute(select(_TGT)).mappings()],
    )


def replace_policy(conn: Connection, policy: Policy) -> tuple[int, int]:
    """The stored policy replaced by ``policy`` (in the caller's transaction); returns
    (calendars, targets) stored."""
    calendars, targets = policy_rows(policy)
    conn.execute(delete(_TGT))
    conn.execute(delete(_CAL))
    if calendars:
        conn.execute(insert(_CAL), calendars)
    if targets:
        conn.execute(insert(_TGT), targets)
    return len(calendars), len(targets)


def _facts(conn: Connection, tickets: Any, rows: Sequence[Any]) -> dict[str, TicketFacts]:
    """The facts of ``rows`` (id, created_at, status, queue, priority), whose ids are
    what the subquery ``tickets`` selects."""
    changes: dict[str, list[Change]] = defaultdict(list)
    events = (
        select(_E.c.ticket_id, _E.c.field, _E.c.old_value, _E.c.new_value, _E.c.created_at)
        .where(_E.c.ticket_id.in_(tickets), _E.c.field.in_((EventField.STATUS, EventField.QUEUE)))
        .order_by(_E.c.ticket_id, _E.c.created_at, _E.c.pk)
    )
    for e in conn.execute(events):
        changes[e.ticket_id].append(Change(str(e.field), e.old_value, e.new_value, e.created_at))
    replies = (
        select(_C.c.ticket_id, func.min(_C.c.created_at).label("first"))
        .where(
            _C.c.ticket_id.in_(tickets),
            _C.c.author_type == AuthorType.AGENT,
            _C.c.visibility == Visibility.PUBLIC,
        )
        .group_by(_C.c.ticket_id)
    )
    first = {r.ticket_id: r.first for r in conn.execute(replies)}
    # MIN() of a timestamp comes back as text on SQLite (the column type is lost).
    first = {k: _utc(v) for k, v in first.items()}
    return {
        r.id: TicketFacts(
            created_at=r.created_at,
            status=TicketStatus(r.status),
            queue=r.queue,
            priority=TicketPriority(r.priority),
            changes=changes.get(r.id, []),
            first_reply_at=first.get(r.id),
        )
        for r in rows
    }


def _utc(value: Any) -> datetime:
    from datetime import UTC

    moment: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_FACT_COLUMNS = (_T.c.id, _T.c.created_at, _T.c.status, _T.c.queue, _T.c.priority)


def ticket_sla(
    conn: Connection, ticket_id: str, now: datetime, policy: Policy | None = None
) -> SlaState | None:
    """The SLA state of one ticket (None: no such ticket)."""
    row = conn.execute(select(*_FACT_COLUMNS).where(_T.c.id == ticket_id)).first()
    if row is None:
        return None
    facts = _facts(conn, [ticket_id], [row])
    return sla_state(facts[ticket_id], policy or load_policy(conn), now)


States = dict[str, tuple[Any, SlaState]]


def states(
    conn: Connection, filters: SearchFilters, now: datetime, limit: int
) -> dict[str, tuple[Any, SlaState]] | None:
    """(ticket row, SLA state) of every ticket ``filters`` select, by id; None when they
    are more than ``limit``."""
    where = filters.conditions()
    total = conn.execute(select(func.count()).select_from(_T).where(*where)).scalar_one()
    if total > limit:
        return None
    columns = (*_FACT_COLUMNS, _T.c.owner, _T.c.subject)
    rows = list(conn.execute(select(*columns).where(*where)))
    ids = select(_T.c.id).where(*where)
    facts = _facts(conn, ids, rows)
    policy = load_policy(conn)
    return {r.id: (r, sla_state(facts[r.id], policy, now)) for r in rows}


def breached(state: SlaState) -> bool:
    return any(c is not None and c.breached for c in (state.first_response, state.resolution))


@dataclass
class Group:
    key: dict[str, str | None]
    count: int = 0
    age: dict[str, int] = field(default_factory=lambda: {name: 0 for name, _ in AGE_BUCKETS})
    breached: int | None = 0
    without_sla: int | None = 0


@dataclass
class Counts:
    total: int
    groups: list[Group]
    sla_note: str | None


def _age_bucket(now: datetime) -> Any:
    whens = [
        (_T.c.created_at > now - bound, name) for name, bound in AGE_BUCKETS if bound is not None
    ]
    return case(*whens, else_=literal(AGE_BUCKETS[-1][0]))


def count(
    conn: Connection,
    filters: SearchFilters,
    group_by: Iterable[str],
    now: datetime,
    limit: int = SLA_COUNT_LIMIT,
    known: tuple[States | None] | None = None,
) -> Counts:
    """Exact counts of the tickets ``filters`` select, grouped by ``group_by`` (of
    ``GROUPS``) and by age; breach counts from each ticket's SLA state, or null (with
    the reason in ``sla_note``) when more than ``limit`` tickets match. ``known``: the
    ``states`` of these filters, already derived."""
    keys = [k for k in GROUPS if k in set(group_by)]
    columns = [_T.c[k] for k in keys]
    bucket = _age_bucket(now).label("bucket")
    stmt = (
        select(*columns, bucket, func.count().label("n"))
        .where(*filters.conditions())
        .group_by(*columns, bucket)
    )
    groups: dict[tuple[Any, ...], Group] = {}
    total = 0
    for row in conn.execute(stmt):
        values = tuple(_text(row[i]) for i in range(len(keys)))
        group = groups.setdefault(values, Group(dict(zip(keys, values, strict=True))))
        group.count += row.n
        group.age[row.bucket] += row.n
        total += row.n
    note = None
    found = known[0] if known is not None else states(conn, filters, now, limit)
    if found is None:
        note = f"breach counts need each ticket's SLA state; more than {limit} tickets match: narrow the filters"
        for group in groups.values():
            group.breached = group.without_sla = None
    else:
        for row, state in found.values():
            values = tuple(_text(getattr(row, k)) for k in keys)
            group = groups[values]
            assert group.breached is not None and group.without_sla is not None
            if not state.covered:
                group.without_sla += 1
            elif breached(state):
                group.breached += 1
    ordered = sorted(groups.values(), key=lambda g: (-g.count, [v or "" for v in g.key.values()]))
    return Counts(total, ordered, note)


def _text(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def due_soon(
    conn: Connection,
    filters: SearchFilters,
    now: datetime,
    within: timedelta,
    limit: int,
    scan: int = SLA_COUNT_LIMIT,
    known: tuple[States | None] | None = None,
) -> tuple[list[tuple[Any, SlaState, datetime]], bool] | None:
    """Tickets whose next due time (first response, else resolution, not met) is before
    ``now + within`` (breached ones included), soonest first, at most ``limit``;
    (tickets, more). None when more than ``scan`` tickets match ``filters``."""
    found = known[0] if known is not None else states(conn, filters, now, scan)
    if found is None:
        return None
    horizon = now + within
    due: list[tuple[Any, SlaState, datetime]] = []
    for row, state in found.values():
        times = [
            c.due_at
            for c in (state.first_response, state.resolution)
            if c is not None and c.met_at is None and c.due_at is not None
        ]
        if times and min(times) <= horizon:
            due.append((row, state, min(times)))
    due.sort(key=lambda item: (item[2], item[0].id))
    return due[:limit], len(due) > limit


def oldest(conn: Connection, filters: SearchFilters, limit: int) -> list[Any]:
    stmt = (
        select(_T.c.id, _T.c.subject, _T.c.status, _T.c.priority, _T.c.owner, _T.c.created_at)
        .where(*filters.conditions())
        .order_by(_T.c.created_at, _T.c.pk)
        .limit(limit)
    )
    return list(conn.execute(stmt))


def report_rows(
    conn: Connection, queue: str | None, since: datetime, now: datetime
) -> list[tuple[Any, SlaState]]:
    """(ticket, SLA state) of every ticket created since ``since`` (in ``queue``)."""
    filters = SearchFilters(created_after=since, queue=(queue,) if queue else None)
    found = states(conn, filters, now, 10_000_000)
    assert found is not None
    return list(found.values())
