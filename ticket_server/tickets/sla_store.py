"""SLA storage and the reads built on it: the policy tables, the facts a ticket's SLA
state is derived from (``tickets.sla``), and exact counts of tickets by group, age and
SLA breach. Functions of a synchronous SQLAlchemy ``Connection``, run by the
repository's ``read`` / ``transaction``; filters are ``tickets.search.SearchFilters``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    select,
    update,
)

from ticket_server.tickets import counts
from ticket_server.tickets.classification_models import Tag, TicketTag
from ticket_server.tickets.domain import (
    AuthorType,
    EventField,
    TicketPriority,
    TicketStatus,
    Visibility,
)
from ticket_server.tickets.models import (
    Comment,
    Customer,
    SlaCalendar,
    SlaPlanTarget,
    SlaTarget,
    Ticket,
    TicketEvent,
)
from ticket_server.tickets.search import SearchFilters
from ticket_server.tickets.sla import (
    DONE,
    Change,
    Policy,
    SlaState,
    TicketFacts,
    policy_from_rows,
    policy_rows,
    sla_state,
)

_T, _E, _C = Ticket.__table__, TicketEvent.__table__, Comment.__table__
_CAL, _TGT, _PLAN = SlaCalendar.__table__, SlaTarget.__table__, SlaPlanTarget.__table__
_TAGS, _TICKET_TAGS = Tag.__table__, TicketTag.__table__

GROUPS = ("queue", "status", "priority", "owner", "tag")
AGE_BUCKETS: tuple[tuple[str, timedelta | None], ...] = (
    ("under_1d", timedelta(days=1)),
    ("1d_to_3d", timedelta(days=3)),
    ("3d_to_7d", timedelta(days=7)),
    ("7d_to_30d", timedelta(days=30)),
    ("over_30d", None),
)
"""Age since creation: each bucket holds tickets younger than its bound (and not younger
than the bucket before)."""


def load_policy(conn: Connection) -> Policy:
    return policy_from_rows(
        [dict(r) for r in conn.execute(select(_CAL)).mappings()],
        [dict(r) for r in conn.execute(select(_TGT)).mappings()],
        [dict(r) for r in conn.execute(select(_PLAN)).mappings()],
    )


def replace_policy(conn: Connection, policy: Policy) -> tuple[int, int]:
    """The stored policy replaced by ``policy`` (in the caller's transaction), and every
    ticket's SLA columns derived again under it; returns (calendars, targets) stored
    (targets: per priority and per plan and priority)."""
    calendars, targets, plan_targets = policy_rows(policy)
    conn.execute(delete(_PLAN))
    conn.execute(delete(_TGT))
    conn.execute(delete(_CAL))
    if calendars:
        conn.execute(insert(_CAL), calendars)
    if targets:
        conn.execute(insert(_TGT), targets)
    if plan_targets:
        conn.execute(insert(_PLAN), plan_targets)
    refresh_all(conn, policy)
    return len(calendars), len(targets) + len(plan_targets)


def _facts(
    conn: Connection, tickets: Any, rows: Sequence[Any], history: bool = True
) -> dict[str, TicketFacts]:
    """The facts of ``rows`` (id, created_at, status, queue, priority), whose ids are
    what the subquery ``tickets`` selects. ``history=False``: they have no events or
    comments (inserted in this transaction without any), so neither is read."""
    changes: dict[str, list[Change]] = defaultdict(list)
    first: dict[str, datetime] = {}
    if history:
        events = (
            select(_E.c.ticket_id, _E.c.field, _E.c.old_value, _E.c.new_value, _E.c.created_at)
            .where(
                _E.c.ticket_id.in_(tickets),
                _E.c.field.in_((EventField.STATUS, EventField.QUEUE)),
            )
            .order_by(_E.c.ticket_id, _E.c.created_at, _E.c.pk)
        )
        for e in conn.execute(events):
            changes[e.ticket_id].append(
                Change(str(e.field), e.old_value, e.new_value, e.created_at)
            )
        replies = (
            select(_C.c.ticket_id, func.min(_C.c.created_at).label("first"))
            .where(
                _C.c.ticket_id.in_(tickets),
                _C.c.author_type == AuthorType.AGENT,
                _C.c.visibility == Visibility.PUBLIC,
            )
            .group_by(_C.c.ticket_id)
        )
        # MIN() of a timestamp comes back as text on SQLite (the column type is lost).
        first = {r.ticket_id: _utc(r.first) for r in conn.execute(replies)}
    return {
        r.id: TicketFacts(
            created_at=r.created_at,
            status=TicketStatus(r.status),
            queue=r.queue,
            priority=TicketPriority(r.priority),
            changes=changes.get(r.id, []),
            first_reply_at=first.get(r.id),
            plan=r.plan,
        )
        for r in rows
    }


def _utc(value: Any) -> datetime:
    from datetime import UTC

    moment: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_CUSTOMERS = Customer.__table__
_FACT_COLUMNS = (
    _T.c.id,
    _T.c.created_at,
    _T.c.status,
    _T.c.queue,
    _T.c.priority,
    # The customer's plan, for per-plan targets (one lookup by the unique name).
    select(_CUSTOMERS.c.plan)
    .where(_CUSTOMERS.c.name == _T.c.customer)
    .scalar_subquery()
    .label("plan"),
)


def ticket_sla(
    conn: Connection, ticket_id: str, now: datetime, policy: Policy | None = None
) -> SlaState | None:
    """The SLA state of one ticket (None: no such ticket)."""
    row = conn.execute(select(*_FACT_COLUMNS).where(_T.c.id == ticket_id)).first()
    if row is None:
        return None
    facts = _facts(conn, [ticket_id], [row])
    return sla_state(facts[ticket_id], policy or load_policy(conn), now)


# --- the stored SLA columns ---------------------------------------------------------
# Between two changes of its facts a ticket's clocks run (or stay paused) as they are,
# so the moment it breaches is fixed at the last change: it is stored then, in the
# change's transaction, and counts and "due before" filters compare it with the time of
# the read in SQL, through an index, without deriving any state.

REFRESH_BATCH = 2_000


def stored_columns(state: SlaState, done: bool) -> dict[str, Any]:
    """``tickets``' SLA columns for ``state`` (derived after the ticket's last change;
    ``done``: the ticket is resolved or closed): ``sla_due_at``, the earliest due time
    of a clock not met (null: none, paused, or the ticket is done: nothing is due on a
    resolved or closed ticket, though a first response it never got stays unmet);
    ``sla_breach_at``, when the first clock breached or, running, will breach (null:
    none will without a further change)."""
    if not state.covered:
        return {"sla_covered": False, "sla_due_at": None, "sla_breach_at": None}
    clocks = [c for c in (state.first_response, state.resolution) if c is not None]
    due = [c.due_at for c in clocks if c.met_at is None and c.due_at is not None]
    breach = [
        c.breached_at if c.breached else c.due_at for c in clocks if c.breached or c.met_at is None
    ]
    moments = [m for m in breach if m is not None]
    return {
        "sla_covered": True,
        "sla_due_at": min(due) if due and not done else None,
        "sla_breach_at": min(moments) if moments else None,
    }


def _settled(facts: TicketFacts) -> datetime:
    """A moment after every stored fact of the ticket: its state then holds until its
    next change (one second after the latest, so that a clock started at it runs)."""
    moments = [facts.created_at, *(c.at for c in facts.changes)]
    if facts.first_reply_at is not None:
        moments.append(facts.first_reply_at)
    return max(moments) + timedelta(seconds=1)


def refresh(
    conn: Connection,
    ticket_ids: Iterable[str],
    policy: Policy | None = None,
    *,
    no_history: Collection[str] = (),
) -> int:
    """Store the SLA columns of ``ticket_ids`` (in the caller's transaction): called
    by every write that changes what a state is derived from (status, queue, priority,
    a public agent reply, the ticket itself) and by a policy change. ``no_history``: ids
    among them known to have no events or comments (inserted in this transaction without
    any). Returns how many tickets were written."""
    ids = sorted(set(ticket_ids))
    if not ids:
        return 0
    policy = policy if policy is not None else load_policy(conn)
    bare, written = set(no_history), 0
    for start in range(0, len(ids), REFRESH_BATCH):
        chunk = ids[start : start + REFRESH_BATCH]
        rows = list(conn.execute(select(*_FACT_COLUMNS).where(_T.c.id.in_(chunk))))
        facts = _facts(conn, chunk, rows, history=not bare.issuperset(chunk))
        values = [
            {"key": r.id, **{"new_" + k: v for k, v in columns.items()}}
            for r in rows
            for columns in (
                stored_columns(
                    sla_state(facts[r.id], policy, _settled(facts[r.id])),
                    facts[r.id].status in DONE,
                ),
            )
        ]
        if values:
            conn.execute(
                update(_T)
                .where(_T.c.id == bindparam("key"))
                .values(
                    sla_covered=bindparam("new_sla_covered"),
                    sla_due_at=bindparam("new_sla_due_at"),
                    sla_breach_at=bindparam("new_sla_breach_at"),
                ),
                values,
            )
        written += len(values)
    return written


def refresh_all(conn: Connection, policy: Policy | None = None) -> int:
    """``refresh`` of every ticket, in batches by primary key; returns how many."""
    policy = policy if policy is not None else load_policy(conn)
    after, written = 0, 0
    while True:
        batch = list(
            conn.execute(
                select(_T.c.pk, _T.c.id)
                .where(_T.c.pk > after)
                .order_by(_T.c.pk)
                .limit(REFRESH_BATCH)
            )
        )
        if not batch:
            return written
        written += refresh(conn, [r.id for r in batch], policy)
        after = batch[-1].pk


def analyze_tickets(conn: Connection) -> None:
    """Bring the planner's view of ``tickets`` up to date after a policy change or a
    recompute has rewritten every ticket's SLA columns. Until then the planner believes
    the old distribution (every ``sla_due_at`` null, say) and may read every open ticket
    for a ``breached`` or ``due_before`` filter; on PostgreSQL the rewrite also left every
    row's old version behind and the visibility map cleared, so the counts read the table
    instead of ``ix_tickets_counts`` alone. Autovacuum would mend both only some time
    later (``bench/ANALYSIS.md``, SLA at 1M on PostgreSQL).

    PostgreSQL: ``VACUUM (ANALYZE)``, then ``ix_tickets_counts`` rebuilt without blocking
    writes (``REINDEX CONCURRENTLY``): every rewritten row left a second entry in it, and
    once vacuumed it kept about three times its pages, which doubled a count's time
    (bench/ANALYSIS.md). ``ticket_count_deltas`` is vacuumed and analyzed too: the
    rewrite appended up to two rows per ticket there, folded since, and while the planner
    still believes they are there it reads every page they left rather than the few
    live rows by status (bench/ANALYSIS.md). Both run outside a transaction.
    SQLite: ``ANALYZE``. Run it through ``TicketRepository.analyze_tickets``, which knows
    which."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("VACUUM (ANALYZE) tickets, ticket_count_deltas")
        conn.exec_driver_sql("REINDEX INDEX CONCURRENTLY ix_tickets_counts")
    else:
        conn.exec_driver_sql("ANALYZE tickets")


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


def _younger_than(now: datetime, sqlite: bool) -> list[Any]:
    """Per age bound, the count of the group's tickets created after ``now`` - bound:
    tallies beside ``count()`` rather than a GROUP BY on a bucket expression, which made the
    engine sort every matching row (a temporary B-tree on SQLite) where the index order
    of the group's columns serves alone."""
    created, moment = _timeline("created_at", sqlite)
    return [
        _tally(created > moment(now - bound)).label(f"younger_{i}")
        for i, (_, bound) in enumerate(AGE_BUCKETS)
        if bound is not None
    ]


_EPOCH, _MICROSECOND = datetime(1970, 1, 1, tzinfo=UTC), timedelta(microseconds=1)


def _timeline(name: str, sqlite: bool) -> tuple[Any, Callable[[datetime], Any]]:
    """The timestamp column ``name`` as the count's tallies compare it with moments, and
    what a moment becomes to be compared with it. SQLite: the column's integer copy,
    microseconds since 1970 UTC (``created_at_us``, ``sla_breach_at_us``, kept equal to
    the text by triggers, revision 0025), which ``ix_tickets_counts`` carries there: the
    text would be compared character by character on every row a count reads."""
    if not sqlite:
        return _T.c[name], lambda moment: moment
    return literal_column(f"tickets.{name}_us"), lambda moment: (moment - _EPOCH) // _MICROSECOND


def _tally(condition: Any) -> Any:
    """``count(*) FILTER (WHERE condition)``: the rows of a group that meet ``condition``
    (SQLite 3.30+, PostgreSQL 9.4+), which both engines run with less work per row than
    ``sum(CASE WHEN ... THEN 1 ELSE 0 END)`` (bench/ANALYSIS.md, issue 34)."""
    return func.count().filter(condition)


def _ages(row: Any) -> dict[str, int]:
    """The age buckets of a row of ``count``'s query, from its cumulative sums."""
    younger = [int(row[f"younger_{i}"] or 0) for i in range(len(AGE_BUCKETS) - 1)] + [row["n"]]
    return {
        name: younger[i] - (younger[i - 1] if i else 0) for i, (name, _) in enumerate(AGE_BUCKETS)
    }


def count(
    conn: Connection, filters: SearchFilters, group_by: Iterable[str], now: datetime
) -> Counts:
    """Exact counts of the tickets ``filters`` select, grouped by ``group_by`` (of
    ``GROUPS``) and by age, with breach counts at ``now`` from the stored SLA columns.
    From the tallies triggers keep (``tickets.counts``) where they hold what is asked,
    else one pass over the tickets (and one more for the total, grouped by tag).
    ``sla_note`` says when some tickets' SLA columns are not derived yet (their breach
    counts are then null)."""
    keys = [k for k in GROUPS if k in set(group_by)]
    if counts.tallied(filters, keys):
        bounds = [bound for _, bound in AGE_BUCKETS if bound is not None]
        rows = counts.count(conn, filters, keys, now, bounds)
    else:
        rows = list(
            conn.execute(_scan(filters, keys, now, conn.dialect.name == "sqlite")).mappings()
        )
    groups: dict[tuple[Any, ...], Group] = {}
    total, unknown = 0, 0
    for row in rows:
        if not row["n"]:  # without group columns, no ticket is still one row
            continue
        values = tuple(_text(row[k]) for k in keys)
        groups[values] = Group(
            dict(zip(keys, values, strict=True)),
            count=int(row["n"]),
            age=_ages(row),
            breached=int(row["late"] or 0),
            without_sla=int(row["without"] or 0),
        )
        unknown += int(row["n"]) - int(row["covered"])
        total += int(row["n"])
    if "tag" in keys:  # each ticket once
        once = conn.execute(
            select(func.count(), func.count(_T.c.sla_covered))
            .select_from(_T)
            .where(*filters.conditions())
        ).one()
        total, unknown = int(once[0]), int(once[0]) - int(once[1])
    note = None
    if unknown:
        note = (
            f"{unknown} of these tickets {'has' if unknown == 1 else 'have'} no SLA state "
            "stored yet (written by an older version): an operator runs `ticket-server sla "
            "recompute`"
        )
        for group in groups.values():
            group.breached = group.without_sla = None
    ordered = sorted(groups.values(), key=lambda g: (-g.count, [v or "" for v in g.key.values()]))
    return Counts(total, ordered, note)


def _scan(filters: SearchFilters, keys: list[str], now: datetime, sqlite: bool) -> Any:
    """One pass over the tickets ``filters`` select (``ix_tickets_counts``), grouped by
    ``keys``, with the columns ``count`` reads."""
    source: Any = _T
    columns: list[Any] = [_T.c[k] for k in keys if k != "tag"]
    if "tag" in keys:  # a ticket counts once per tag it has; one without tags under null
        tags = (
            select(_TICKET_TAGS.c.ticket_pk, _TAGS.c.name)
            .join(_TAGS, _TAGS.c.id == _TICKET_TAGS.c.tag_id)
            .subquery()
        )
        source = _T.outerjoin(tags, tags.c.ticket_pk == _T.c.pk)
        columns.append(tags.c.name.label("tag"))
    breach, moment = _timeline("sla_breach_at", sqlite)
    return (
        select(
            *columns,
            func.count().label("n"),
            *_younger_than(now, sqlite),
            _tally(breach <= moment(now)).label("late"),
            _tally(_T.c.sla_covered.is_(False)).label("without"),
            # Tickets whose SLA columns are not derived yet (sla_covered null): count(*)
            # less count(sla_covered), which costs less than a third conditional tally.
            func.count(_T.c.sla_covered).label("covered"),
        )
        .select_from(source)
        .where(*filters.conditions())
        .group_by(*columns)
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def due_soon(
    conn: Connection, filters: SearchFilters, now: datetime, within: timedelta, limit: int
) -> tuple[list[tuple[Any, SlaState, datetime]], bool]:
    """Tickets whose next due time (first response, else resolution, not met) is before
    ``now + within`` (breached ones included), soonest first, at most ``limit``, with
    their SLA states; (tickets, more). Read through the index on ``sla_due_at``."""
    columns = (*_FACT_COLUMNS, _T.c.owner, _T.c.subject, _T.c.sla_due_at)
    rows = list(
        conn.execute(
            select(*columns)
            .where(*filters.conditions(), _T.c.sla_due_at <= now + within)
            .order_by(_T.c.sla_due_at, _T.c.id)
            .limit(limit + 1)
        )
    )
    facts = _facts(conn, [r.id for r in rows[:limit]], rows[:limit])
    policy = load_policy(conn)
    due = [(r, sla_state(facts[r.id], policy, now), r.sla_due_at) for r in rows[:limit]]
    return due, len(rows) > limit


def oldest(conn: Connection, filters: SearchFilters, limit: int) -> list[Any]:
    stmt = (
        select(_T.c.id, _T.c.subject, _T.c.status, _T.c.priority, _T.c.owner, _T.c.created_at)
        .where(*filters.conditions())
        .order_by(_T.c.created_at, _T.c.pk)
        .limit(limit)
    )
    return list(conn.execute(stmt))


def report_rows(
    conn: Connection, queues: tuple[str, ...] | None, since: datetime, now: datetime
) -> list[tuple[Any, SlaState]]:
    """(ticket, SLA state) of every ticket created since ``since`` (in ``queues``)."""
    filters = SearchFilters(created_after=since, queue=queues)
    found = states(conn, filters, now, 10_000_000)
    assert found is not None
    return list(found.values())
