"""TicketRepository: every query the tools make, in SQLAlchemy Core.

A tool's read is one synchronous function over a SQLAlchemy ``Connection``; the
repository's storage executor (``tickets.storage``) runs it, on SQLite in a worker
thread, on PostgreSQL through ``AsyncConnection.run_sync``. Driver and pool failures
surface as ``DatabaseUnavailable`` so that callers can answer "ticket database
unavailable" without knowing the engine, and every query is bounded in time by
``database_timeout``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, and_, bindparam, func, insert, or_, select, text, update

from ticket_server.tickets.domain import OPEN_STATUSES, SearchTooCostly
from ticket_server.tickets.models import Comment, Customer, Queue, Requester, Ticket, TicketEvent
from ticket_server.tickets.schemas import (
    CommentRecord,
    CustomerRecord,
    CustomerView,
    EventRecord,
    RequesterRecord,
    TicketRecord,
    TicketSummaryV2,
    TicketView,
)

if TYPE_CHECKING:  # the search module (analyzer, stemmers) loads with the first search or write
    from ticket_server.tickets.search import Position, SearchFilters, Sort
    from ticket_server.tickets.storage import Storage

log = logging.getLogger(__name__)
_TICKETS = Ticket.__table__
_RECORD_COLUMNS = [_TICKETS.c[name] for name in TicketRecord.model_fields]
_SUMMARY_COLUMNS = [_TICKETS.c[name] for name in TicketSummaryV2.model_fields]
_MATCH_COLUMNS = [_TICKETS.c.search_subject, _TICKETS.c.search_body]
_COUNT_TICKETS = select(func.count()).select_from(_TICKETS)
_GET = select(*_RECORD_COLUMNS).where(_TICKETS.c.id == bindparam("ticket_id"))
_CUSTOMERS, _COMMENTS, _EVENTS = Customer.__table__, Comment.__table__, TicketEvent.__table__
_CUSTOMER_COLUMNS = [_CUSTOMERS.c[name] for name in CustomerRecord.model_fields]
_COMMENT_COLUMNS = [_COMMENTS.c[name] for name in CommentRecord.model_fields]
_EVENT_COLUMNS = [_EVENTS.c[name] for name in EventRecord.model_fields]


def _count(table: Any) -> Any:
    return (
        select(func.count())
        .select_from(table)
        .where(table.c.ticket_id == _TICKETS.c.id)
        .scalar_subquery()
    )


# The full read in three statements: the ticket with its customer and both totals, one
# page of comments, the latest events. Built once; a read only binds its values.
_VIEW = (
    select(
        *_RECORD_COLUMNS,
        _TICKETS.c.version,
        *(column.label(f"customer_{column.name}") for column in _CUSTOMER_COLUMNS),
        _count(_COMMENTS).label("comment_total"),
        _count(_EVENTS).label("event_total"),
        Queue.__table__.c.display_name.label("queue_display_name"),
        *(Requester.__table__.c[c].label(f"requester_{c}") for c in ("id", "name", "email")),
    )
    .select_from(
        _TICKETS.outerjoin(_CUSTOMERS, _CUSTOMERS.c.name == _TICKETS.c.customer)
        .outerjoin(Queue.__table__, Queue.__table__.c.name == _TICKETS.c.queue)
        .outerjoin(Requester.__table__, Requester.__table__.c.id == _TICKETS.c.requester_id)
    )
    .where(_TICKETS.c.id == bindparam("ticket_id"))
)
_VIEW_IN_QUEUES = _VIEW.where(_TICKETS.c.queue.in_(bindparam("queues", expanding=True)))
_NEWEST_COMMENTS = (_COMMENTS.c.created_at.desc(), _COMMENTS.c.pk.desc())
_COMMENTS_PAGE = (
    select(*_COMMENT_COLUMNS)
    .where(_COMMENTS.c.ticket_id == bindparam("ticket_id"))
    .order_by(*_NEWEST_COMMENTS)
    .limit(bindparam("comment_limit"))
)
_COMMENTS_BEFORE = _COMMENTS_PAGE.where(
    or_(
        _COMMENTS.c.created_at < bindparam("before_at"),
        and_(
            _COMMENTS.c.created_at == bindparam("before_at"),
            _COMMENTS.c.pk < bindparam("before_pk"),
        ),
    )
)
_EVENTS_PAGE = (
    select(*_EVENT_COLUMNS)
    .where(_EVENTS.c.ticket_id == bindparam("ticket_id"))
    .order_by(_EVENTS.c.created_at.desc(), _EVENTS.c.pk.desc())
    .limit(bindparam("event_limit"))
)


def _in_queues(stmt: Any, queues: frozenset[str] | None) -> Any:
    return stmt if queues is None else stmt.where(_TICKETS.c.queue.in_(sorted(queues)))


def _prefix(column: Any, prefix: str) -> Any:
    """``column`` starts with ``prefix``, any case; ``%`` and ``_`` literal."""
    return func.lower(column).startswith(prefix.lower(), autoescape=True)


# The distinct queues of the tickets by a loose index scan (one index probe per queue),
# on both engines, and the queues table's: one added by an operator holds no ticket yet.
_QUEUES = text("""
    WITH RECURSIVE q(name) AS (
        SELECT min(queue) FROM tickets
        UNION ALL
        SELECT (SELECT min(queue) FROM tickets WHERE queue > q.name) FROM q WHERE q.name IS NOT NULL
    ) SELECT name FROM q WHERE name IS NOT NULL UNION SELECT name FROM queues ORDER BY 1""")
T = TypeVar("T")
SUBSTRING_SEARCH_SECONDS = 1.0
"""Most seconds one deprecated substring search may scan on SQLite."""


@dataclass(frozen=True)
class SearchResult:
    """One page of search: tickets with the position a page ending on each continues
    from, whether more follow, and a note on what the search did (see ``explain``);
    for a search of the conversation with words, where each ticket matched
    (``tickets.search.matched_in``), else None."""

    tickets: list[tuple[TicketSummaryV2, Position]]
    more: bool
    note: str | None
    matched_in: dict[str, list[str]] | None = None


class TicketRepository:
    """Every query the tools make, run by one storage executor (``storage``: SQLite's or
    PostgreSQL's); ``aclose()`` releases its connections."""

    def __init__(self, storage: Storage, synonyms: Path | None = None) -> None:
        self.storage = storage
        self.synonyms = synonyms
        """The query synonyms file of search (None: the default list), read once per
        process, at its first search (``tickets.synonyms``; ``serve`` checks it first)."""

    @property
    def dialect(self) -> str:
        return self.storage.dialect

    async def aclose(self) -> None:
        await self.storage.aclose()

    async def read(self, read: Callable[[Connection], T]) -> T:
        """``read(connection)``, a function of synchronous SQLAlchemy Core calls, as one
        read (``Storage.read``)."""
        return await self.storage.read(read)

    async def transaction(self, work: Callable[[Connection], T], *, row: str | None = None) -> T:
        """``work(connection)`` in one write transaction, committed when it returns and
        rolled back when it raises (``Storage.write``). Writers are serialised: on SQLite
        by the file's write lock, taken first; on PostgreSQL ``work`` locks the rows it
        changes (``SELECT ... FOR UPDATE``, across processes) and this process's writers
        of the same ``row`` (the key of the row ``work`` locks; None: any row) take turns
        before taking a connection, while writers of other rows go ahead."""
        return await self.storage.write(work, row=row)

    async def get(
        self, ticket_id: str, queues: frozenset[str] | None = None
    ) -> TicketRecord | None:
        """The ticket ``ticket_id``; None when missing or outside ``queues`` (None = all)."""
        stmt = _GET if queues is None else _GET.where(_TICKETS.c.queue.in_(sorted(queues)))

        def read(conn: Connection) -> TicketRecord | None:
            row = conn.execute(stmt, {"ticket_id": ticket_id}).mappings().first()
            return TicketRecord.model_validate(dict(row)) if row is not None else None

        return await self.storage.read_point(read)

    async def ticket_view(
        self,
        ticket_id: str,
        queues: frozenset[str] | None,
        *,
        comments_before: tuple[datetime, int] | None,
        comment_limit: int,
        event_limit: int,
    ) -> TicketView | None:
        """The ticket ``ticket_id`` with its customer, the ``comment_limit`` newest comments
        older than ``comments_before`` (created_at, key; None: the newest), the
        ``event_limit`` newest events, and the totals; None when missing or outside
        ``queues`` (None = all). One read."""
        found = _VIEW if queues is None else _VIEW_IN_QUEUES
        comments = _COMMENTS_PAGE if comments_before is None else _COMMENTS_BEFORE
        params = {
            "ticket_id": ticket_id,
            "queues": sorted(queues or ()),
            "comment_limit": comment_limit,
            "event_limit": event_limit,
            "before_at": comments_before and comments_before[0],
            "before_pk": comments_before and comments_before[1],
        }

        def read(conn: Connection) -> TicketView | None:
            row = conn.execute(found, params).mappings().first()
            if row is None:
                return None
            customer = {name: row[f"customer_{name}"] for name in CustomerRecord.model_fields}
            return TicketView(
                ticket=TicketRecord.model_validate(
                    {name: row[name] for name in TicketRecord.model_fields}
                ),
                version=row["version"],
                customer=CustomerRecord.model_validate(customer)
                if customer["id"] is not None
                else None,
                comments=[
                    CommentRecord.model_validate(dict(r))
                    for r in conn.execute(comments, params).mappings()
                ],
                comment_total=row["comment_total"],
                events=[
                    EventRecord.model_validate(dict(r))
                    for r in conn.execute(_EVENTS_PAGE, params).mappings()
                ],
                event_total=row["event_total"],
                queue_display_name=row["queue_display_name"],
                requester=RequesterRecord(
                    id=row["requester_id"], name=row["requester_name"], email=row["requester_email"]
                )
                if row["requester_id"] is not None
                else None,
                links=links_of(conn, ticket_id, queues),
            )

        from ticket_server.tickets.links import links_of

        return await self.storage.read_point(read)

    async def customer_view(
        self, customer_id: str, queues: frozenset[str] | None, limit: int
    ) -> CustomerView | None:
        """The customer ``customer_id`` with its open and most recently updated tickets
        (at most ``limit`` each) in ``queues`` (None = all); None when missing, or when
        none of its tickets is in ``queues`` (a restricted caller learns of no other)."""
        found = select(*_CUSTOMER_COLUMNS).where(_CUSTOMERS.c.id == customer_id)

        def read(conn: Connection) -> CustomerView | None:
            row = conn.execute(found).mappings().first()
            if row is None:
                return None
            customer = CustomerRecord.model_validate(dict(row))
            mine = _TICKETS.c.customer == customer.name
            is_open = _TICKETS.c.status.in_(sorted(OPEN_STATUSES))
            newest = (_TICKETS.c.updated_at.desc(), _TICKETS.c.pk.desc())
            total = conn.execute(
                _in_queues(select(func.count()).select_from(_TICKETS).where(mine), queues)
            ).scalar_one()
            if total == 0 and queues is not None:
                return None

            def tickets(*where: Any) -> list[TicketRecord]:
                stmt = (
                    _in_queues(select(*_RECORD_COLUMNS).where(mine, *where), queues)
                    .order_by(*newest)
                    .limit(limit)
                )
                return [TicketRecord.model_validate(dict(r)) for r in conn.execute(stmt).mappings()]

            return CustomerView(
                customer=customer,
                open_tickets=tickets(is_open),
                open_total=conn.execute(
                    _in_queues(
                        select(func.count()).select_from(_TICKETS).where(mine, is_open), queues
                    )
                ).scalar_one(),
                recent_tickets=tickets(),
                ticket_total=total,
            )

        return await self.storage.read(read)

    async def complete_ticket_ids(
        self, prefix: str, queues: frozenset[str] | None, limit: int
    ) -> list[str]:
        """Ticket ids starting with ``prefix`` (any case) in ``queues``, in id order."""
        stmt = _in_queues(
            select(_TICKETS.c.id).where(_TICKETS.c.id.startswith(prefix.upper(), autoescape=True)),
            queues,
        )
        stmt = stmt.order_by(_TICKETS.c.id).limit(limit)
        return await self.storage.read(lambda conn: list(conn.execute(stmt).scalars()))

    async def complete_queues(
        self, prefix: str, queues: frozenset[str] | None, limit: int
    ) -> list[str]:
        """Names of active queues (the queues table) starting with ``prefix`` (any case),
        among ``queues`` (None = all)."""
        q = Queue.__table__
        stmt = select(q.c.name).where(_prefix(q.c.name, prefix), q.c.active.is_(True))
        if queues is not None:
            stmt = stmt.where(q.c.name.in_(sorted(queues)))
        stmt = stmt.order_by(q.c.name).limit(limit)
        return await self.storage.read(lambda conn: list(conn.execute(stmt).scalars()))

    async def complete_owners(
        self, prefix: str, queues: frozenset[str] | None, limit: int
    ) -> list[str]:
        """Owner logins starting with ``prefix`` (any case) of tickets in ``queues``."""
        stmt = select(_TICKETS.c.owner).where(
            _TICKETS.c.owner.is_not(None), _prefix(_TICKETS.c.owner, prefix)
        )
        stmt = _in_queues(stmt.distinct(), queues).order_by(_TICKETS.c.owner).limit(limit)
        return await self.storage.read(lambda conn: list(conn.execute(stmt).scalars()))

    async def complete_customers(
        self, prefix: str, queues: frozenset[str] | None, limit: int
    ) -> list[str]:
        """Ids of customers whose id or name starts with ``prefix`` (any case) and who have
        a ticket in ``queues``, in id order."""
        has_ticket = _in_queues(
            select(_TICKETS.c.pk).where(_TICKETS.c.customer == _CUSTOMERS.c.name), queues
        )
        stmt = (
            select(_CUSTOMERS.c.id)
            .where(
                or_(_prefix(_CUSTOMERS.c.id, prefix), _prefix(_CUSTOMERS.c.name, prefix)),
                has_ticket.exists(),
            )
            .order_by(_CUSTOMERS.c.id)
            .limit(limit)
        )
        return await self.storage.read(lambda conn: list(conn.execute(stmt).scalars()))

    async def search_subject(
        self, query: str, limit: int, queues: frozenset[str] | None = None
    ) -> list[TicketRecord]:
        """Tickets whose subject contains ``query`` case-insensitively, newest first,
        only in ``queues`` (None = every queue).

        ``%`` and ``_`` in ``query`` are literal (LIKE with an escape character).
        """
        # lower(subject) LIKE lower(query), the expression the pg_trgm index is built on
        # (PostgreSQL); SQLite's lower() is Python's, registered on every connection.
        stmt = select(*_RECORD_COLUMNS).where(
            func.lower(_TICKETS.c.subject).contains(query.lower(), autoescape=True)
        )
        if queues is not None:
            stmt = stmt.where(_TICKETS.c.queue.in_(sorted(queues)))
        stmt = stmt.order_by(_TICKETS.c.updated_at.desc(), _TICKETS.c.pk.desc()).limit(limit)

        def read(conn: Connection) -> list[TicketRecord]:
            return [TicketRecord.model_validate(dict(row)) for row in conn.execute(stmt).mappings()]

        if self.dialect == "postgresql":  # the pg_trgm index serves the pattern
            return await self.storage.read(read)
        # SQLite scans every subject: the scan is stopped (interrupted by SQLite's
        # progress handler) at its own budget, counted from its first step, not from a
        # wait for a worker thread or a busy machine, so a burst of them cannot hold the
        # worker threads other callers' reads need.
        budget = min(SUBSTRING_SEARCH_SECONDS, self.storage.timeout / 2)

        def scan(conn: Connection) -> list[TicketRecord]:
            from sqlalchemy.exc import OperationalError

            sqlite = conn.connection.driver_connection
            assert sqlite is not None  # a checked-out connection holds its driver's
            deadline = time.monotonic() + budget
            sqlite.set_progress_handler(lambda: time.monotonic() > deadline, 1000)
            try:
                return read(conn)
            except OperationalError as exc:
                if time.monotonic() > deadline:
                    raise SearchTooCostly() from exc
                raise
            finally:
                sqlite.set_progress_handler(None, 0)

        return await self.storage.read(scan)

    async def search(
        self,
        query: str,
        filters: SearchFilters,
        sort: Sort,
        after: Position | None,
        limit: int,
        conversation: bool = False,
    ) -> SearchResult:
        """One page of at most ``limit`` tickets of full-text search, after ``after``;
        ranking and paging are described in ``tickets.search`` (``conversation``: the
        tickets' comments are searched too)."""
        from ticket_server.tickets.search import (
            analyze_query,
            best_first_applies,
            build_page,
            matched_in,
            relevance_page,
            row_position,
        )
        from ticket_server.tickets.search_notes import explain
        from ticket_server.tickets.synonyms import search_synonyms

        dialect = self.dialect

        def read(conn: Connection) -> SearchResult:
            # read once per process, here in the executor's thread (not the event loop's)
            synonyms = search_synonyms(self.synonyms)
            analyzed = analyze_query(conn, query, conversation, filters.scope(), synonyms)
            if analyzed.has_words and not analyzed.words:
                return SearchResult(
                    [],
                    False,
                    explain(conn, dialect, analyzed, filters, None, after is not None, sort),
                )
            columns = _SUMMARY_COLUMNS + (_MATCH_COLUMNS if conversation else [])
            if best_first_applies(analyzed.words, filters, sort, conversation, after):
                rows = relevance_page(
                    conn, dialect, columns, analyzed.words, filters, after, limit + 1
                )
            else:
                rows = conn.execute(
                    build_page(
                        dialect,
                        columns,
                        analyzed.words,
                        filters,
                        sort,
                        after,
                        limit + 1,
                        conversation,
                    )
                ).all()
            page = [
                (TicketSummaryV2.model_validate(dict(r._mapping)), row_position(r))
                for r in rows[:limit]
            ]
            note = explain(
                conn, dialect, analyzed, filters, rows[0] if rows else None, after is not None, sort
            )
            places = (
                matched_in(conn, dialect, analyzed.words, rows[:limit])
                if conversation and analyzed.words
                else None
            )
            return SearchResult(page, len(rows) > limit, note, places)

        return await self.storage.read(read)

    async def queues(self) -> list[str]:
        """Every queue, sorted: those that hold a ticket and those of the queues table
        (an operator's new queue before its first ticket)."""
        return await self.storage.read(lambda conn: [r[0] for r in conn.execute(_QUEUES)])

    async def count(self) -> int:
        """How many tickets there are."""
        return await self.storage.read(lambda conn: int(conn.scalar(_COUNT_TICKETS) or 0))

    async def add_all(
        self,
        tickets: Iterable[dict[str, Any]],
        comments: Iterable[dict[str, Any]] = (),
        events: Iterable[dict[str, Any]] = (),
    ) -> int:
        """``insert_tickets`` in a transaction of its own; returns how many tickets."""
        rows, comment_rows, event_rows = list(tickets), list(comments), list(events)
        if not (rows or comment_rows or event_rows):
            return 0
        return await self.transaction(
            lambda conn: insert_tickets(conn, rows, comment_rows, event_rows)
        )

    async def add_customers(self, customers: Iterable[dict[str, Any]]) -> int:
        """Insert customers (dicts of column values) in one transaction; returns how many."""
        rows = list(customers)
        if rows:
            await self.transaction(lambda conn: conn.execute(insert(_CUSTOMERS), rows))
        return len(rows)

    async def set_text(self, ticket_id: str, subject: str, body: str) -> bool:
        """Change a ticket's subject and body, keeping its search index in step;
        False when there is no such ticket. Every write of subject or body goes here."""
        from ticket_server.tickets.search import search_columns

        row = {"id": ticket_id, "subject": subject, "body": body, **search_columns(subject, body)}
        return await self.transaction(lambda conn: _write_text(conn, [row], insert_rows=False)) > 0

    async def analyze_tickets(self) -> None:
        """The planner's view of ``tickets`` brought up to date after every ticket was
        rewritten (``tickets.sla_store.analyze_tickets``): on PostgreSQL outside a
        transaction, as VACUUM must run (a read is autocommit there), on SQLite in one.
        First the ticket tallies' deltas the rewrite appended (up to two per ticket,
        which every count would add up until the next fold) are folded."""
        from ticket_server.tickets.sla_store import analyze_tickets

        await self.fold_deltas()

        if self.dialect == "postgresql":
            await self.read(analyze_tickets)
        else:
            await self.transaction(analyze_tickets)

    async def analyze_unindexed_comments(self, batch: int = 2000) -> int:
        """Give search text to every comment stored without it (see
        ``tickets.search.analyze_unindexed_comments``), ``batch`` comments per
        transaction; returns how many. Running it again finds none."""
        from ticket_server.tickets.search import analyze_unindexed_comments

        return await self._in_batches(analyze_unindexed_comments, batch)

    async def post_unposted_tickets(self, batch: int = 2000) -> int:
        """Write every ticket's missing search postings (see
        ``tickets.search.post_unposted_tickets``), ``batch`` tickets per transaction;
        returns how many tickets were looked at."""
        from ticket_server.tickets.search import post_unposted_tickets

        return await self._in_batches(post_unposted_tickets, batch)

    async def fold_deltas(self) -> int:
        """Fold the deltas writes left into the counts they change (``tickets.folding``):
        the search word counts and the ticket tallies, ``FOLD_ROWS`` per transaction;
        returns how many rows."""
        from ticket_server.tickets.counts import fold_count_deltas, has_count_deltas
        from ticket_server.tickets.folding import FOLD_ROWS
        from ticket_server.tickets.search import fold_term_deltas, has_term_deltas

        total = 0
        for waiting, step in (
            (has_term_deltas, fold_term_deltas),
            (has_count_deltas, fold_count_deltas),
        ):
            if not await self.storage.read(waiting):  # nothing to write (nor a write lock)
                continue
            while (done := await self.transaction(step)) >= FOLD_ROWS:
                total += done
            total += done
        return total

    async def _in_batches(self, step: Callable[..., tuple[int, int]], batch: int) -> int:
        """``step(connection, after=key, batch=batch)`` in one transaction each, from key 0
        on, until it returns the key 0 (none left); returns the sum of the counts it returns."""
        after, total = 0, 0
        while True:
            after, done = await self.transaction(partial(step, after=after, batch=batch))
            total += done
            if after == 0:
                return total

    async def ping(self) -> None:
        """Raise ``DatabaseUnavailable`` unless the tickets table answers."""
        await self.storage.read(lambda conn: conn.execute(select(Ticket.id).limit(1)).all())


def insert_tickets(
    conn: Connection,
    tickets: Iterable[dict[str, Any]],
    comments: Iterable[dict[str, Any]] = (),
    events: Iterable[dict[str, Any]] = (),
    *,
    references_exist: bool = False,
) -> int:
    """Insert tickets (dicts of column values) with their search columns (``search_terms``
    follows), then comments and events (each names its ticket by ``ticket_id``, already
    stored or among ``tickets``), on ``conn``, in the caller's transaction. Returns how
    many tickets. ``references_exist``: the caller has checked that every queue and
    organisation the tickets name exists; otherwise the missing ones are made."""
    from ticket_server.tickets.directory import ensure_references
    from ticket_server.tickets.search import comment_search_bodies, search_columns

    rows = [{**t, **search_columns(t["subject"], t["body"])} for t in tickets]
    if not references_exist:
        ensure_references(conn, rows)  # their queues and organisations (foreign keys, 0012)
    written = _write_text(conn, rows, insert_rows=True) if rows else 0
    comment_rows = list(comments)
    if comment_rows:
        bodies = comment_search_bodies(conn, [c["body"] for c in comment_rows])
        conn.execute(
            insert(Comment),
            [{**c, "search_body": b} for c, b in zip(comment_rows, bodies, strict=True)],
        )
    event_rows = list(events)
    if event_rows:
        conn.execute(insert(TicketEvent), event_rows)
    from ticket_server.tickets import sla_store

    with_history = {r["ticket_id"] for r in (*comment_rows, *event_rows)}
    new = {r["id"] for r in rows}
    sla_store.refresh(conn, with_history | new, no_history=new - with_history)
    return written


def _write_text(conn: Connection, rows: list[dict[str, Any]], *, insert_rows: bool) -> int:
    """Insert ``rows`` (whole tickets), or update subject and body of the tickets with
    their ids, with their search columns; ``search_terms`` follows. Returns how many
    tickets were written. The one write path of ticket text: the full-text indexes are
    built on the search columns (by trigger on SQLite, a generated column on PostgreSQL),
    and the tickets' search postings are written here."""
    from ticket_server.tickets.search import TOTAL, count_terms, post, ticket_terms, unpost

    delta: Counter[str] = Counter()
    written: list[dict[str, Any]] = []
    if insert_rows:
        # The postings name the key and creation time the database gave. PostgreSQL
        # returns them from the INSERT, in the rows' order (a round trip fewer). SQLite
        # reads them after it: SQLAlchemy can order its RETURNING only one row per
        # statement, which would undo the batch, and a read there is no round trip (and
        # needs no SQLite 3.35).
        if conn.dialect.name == "postgresql":
            given = conn.execute(
                insert(Ticket).returning(
                    _TICKETS.c.id,
                    _TICKETS.c.pk,
                    _TICKETS.c.created_at,
                    sort_by_parameter_order=True,
                ),
                rows,
            ).all()
        else:
            conn.execute(insert(Ticket), rows)
            given = [
                key
                for start in range(0, len(rows), 5000)
                for key in conn.execute(
                    select(_TICKETS.c.id, _TICKETS.c.pk, _TICKETS.c.created_at).where(
                        _TICKETS.c.id.in_([r["id"] for r in rows[start : start + 5000]])
                    )
                )
            ]
        keys = {k.id: k for k in given}
        written = [
            {**r, "pk": keys[r["id"]].pk, "created_at": keys[r["id"]].created_at} for r in rows
        ]
    for row in [] if insert_rows else rows:
        old = (
            conn.execute(
                select(
                    _TICKETS.c.pk,
                    _TICKETS.c.created_at,
                    _TICKETS.c.search_subject,
                    _TICKETS.c.search_body,
                ).where(_TICKETS.c.id == row["id"])
            )
            .mappings()
            .first()
        )
        if old is None:
            continue
        delta.subtract(ticket_terms(dict(old)))
        delta[TOTAL] -= 1
        unpost(conn, [old])
        conn.execute(
            update(Ticket)
            .where(Ticket.id == row["id"])
            .values({k: row[k] for k in ("subject", "body", "search_subject", "search_body")})
        )
        written.append({**row, "pk": old["pk"], "created_at": old["created_at"]})
    for row in written:
        delta.update(ticket_terms(row))
    delta[TOTAL] += len(written)
    count_terms(conn, delta)
    post(conn, written)
    return len(written)
