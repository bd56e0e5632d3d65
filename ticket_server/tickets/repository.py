"""TicketRepository: every query the tools make, in SQLAlchemy Core.

A tool's read is one synchronous function over a SQLAlchemy ``Connection`` (see
``_read``): on SQLite it runs in one worker thread on a pysqlite engine, on PostgreSQL
through ``AsyncConnection.run_sync`` on asyncpg. Driver and pool failures surface as
``DatabaseUnavailable`` so that callers can answer "ticket database unavailable"
without knowing the engine, and every query is bounded in time by ``database_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, bindparam, func, insert, select, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from ticket_server.tickets.domain import DatabaseUnavailable
from ticket_server.tickets.models import Ticket
from ticket_server.tickets.schemas import TicketRecord, TicketSummaryV2
from ticket_server.tickets.search import (
    TOTAL, Position, SearchFilters, Sort, analyze_query, build_page, count_terms, explain, row_position,
    search_columns, ticket_terms,
)

log = logging.getLogger(__name__)
_TICKETS = Ticket.__table__
_RECORD_COLUMNS = [_TICKETS.c[name] for name in TicketRecord.model_fields]
_SUMMARY_COLUMNS = [_TICKETS.c[name] for name in TicketSummaryV2.model_fields]
_GET = select(*_RECORD_COLUMNS).where(_TICKETS.c.id == bindparam("ticket_id"))
# The distinct queues by a loose index scan (one index probe per queue), on both engines.
_QUEUES = text("""
    WITH RECURSIVE q(name) AS (
        SELECT min(queue) FROM tickets
        UNION ALL
        SELECT (SELECT min(queue) FROM tickets WHERE queue > q.name) FROM q WHERE q.name IS NOT NULL
    ) SELECT name FROM q WHERE name IS NOT NULL""")
T = TypeVar("T")


@dataclass(frozen=True)
class SearchResult:
    """One page of search: tickets with the position a page ending on each continues
    from, whether more follow, and a note on what the search did (see ``explain``)."""

    tickets: list[tuple[TicketSummaryV2, Position]]
    more: bool
    note: str | None


class TicketRepository:
    """Queries over one engine; ``aclose()`` releases its connections.

    ``reader``, for SQLite, is a synchronous (pysqlite) engine on the same file: each
    read then costs one worker-thread hop, where aiosqlite makes one per DBAPI call
    (cursor, execute, fetch, close, rollback), which was most of a ticket lookup's
    cost under concurrent callers.
    """

    def __init__(self, engine: AsyncEngine, timeout: float, reader: Engine | None = None) -> None:
        self._engine = engine
        self._reader = reader
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._timeout = timeout

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    async def aclose(self) -> None:
        await self._engine.dispose()
        if self._reader is not None:
            self._reader.dispose()

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[AsyncSession]:
        try:
            async with asyncio.timeout(self._timeout), self._sessions() as session:
                yield session
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            # The detail (SQL, DSN, path) stays in the log; callers get a plain fact.
            log.error("ticket database unavailable", exc_info=exc)
            raise DatabaseUnavailable() from exc

    async def _read(self, read: Callable[[Connection], T]) -> T:
        """``read(connection)``, a function of synchronous SQLAlchemy Core calls, as one
        read: in a worker thread on the SQLite reader, else on an async connection via
        ``run_sync`` (asyncpg, no thread)."""
        try:
            async with asyncio.timeout(self._timeout):
                if self._reader is not None:
                    return await self._read_in_thread(read)
                async with self._engine.connect() as conn:
                    return await conn.run_sync(read)
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            log.error("ticket database unavailable", exc_info=exc)
            raise DatabaseUnavailable() from exc

    async def _read_in_thread(self, read: Callable[[Connection], T]) -> T:
        # A worker thread cannot be cancelled: when the caller gives up (timeout,
        # cancellation) the query is interrupted (sqlite3's interrupt(), made to be called
        # from another thread), or abandoned queries would hold every worker thread.
        # The lock keeps the interrupt from reaching the connection once it is back in
        # the pool, where another read may have it.
        lock = threading.Lock()
        running: list[Any] = []

        def work() -> T:
            assert self._reader is not None
            with self._reader.connect() as conn:
                with lock:
                    running.append(conn.connection.dbapi_connection)
                try:
                    return read(conn)
                finally:
                    with lock:
                        running.clear()

        try:
            return await asyncio.to_thread(work)
        except asyncio.CancelledError:
            with lock:
                for dbapi_connection in running:
                    dbapi_connection.interrupt()
            raise

    async def get(self, ticket_id: str, queues: frozenset[str] | None = None) -> TicketRecord | None:
        """The ticket ``ticket_id``; None when missing or outside ``queues`` (None = all)."""
        stmt = _GET if queues is None else _GET.where(_TICKETS.c.queue.in_(sorted(queues)))

        def read(conn: Connection) -> TicketRecord | None:
            row = conn.execute(stmt, {"ticket_id": ticket_id}).mappings().first()
            return TicketRecord.model_validate(dict(row)) if row is not None else None

        return await self._read(read)

    async def search_subject(
        self, query: str, limit: int, queues: frozenset[str] | None = None
    ) -> list[TicketRecord]:
        """Tickets whose subject contains ``query`` case-insensitively, newest first,
        only in ``queues`` (None = every queue).

        ``%`` and ``_`` in ``query`` are literal (LIKE with an escape character).
        """
        stmt = select(*_RECORD_COLUMNS).where(_TICKETS.c.subject.icontains(query, autoescape=True))
        if queues is not None:
            stmt = stmt.where(_TICKETS.c.queue.in_(sorted(queues)))
        stmt = stmt.order_by(_TICKETS.c.updated_at.desc(), _TICKETS.c.pk.desc()).limit(limit)

        def read(conn: Connection) -> list[TicketRecord]:
            return [TicketRecord.model_validate(dict(row)) for row in conn.execute(stmt).mappings()]

        return await self._read(read)

    async def search(
        self, query: str, filters: SearchFilters, sort: Sort, after: Position | None, limit: int
    ) -> SearchResult:
        """One page of at most ``limit`` tickets of full-text search, after ``after``;
        ranking and paging are described in ``tickets.search``."""
        dialect = self.dialect

        def read(conn: Connection) -> SearchResult:
            analyzed = analyze_query(conn, query)
            if analyzed.has_words and not analyzed.words:
                return SearchResult([], False, explain(conn, dialect, analyzed, filters, None, after is not None))
            stmt = build_page(dialect, _SUMMARY_COLUMNS, analyzed.words, filters, sort, after, limit + 1)
            rows = conn.execute(stmt).all()
            page = [(TicketSummaryV2.model_validate(dict(r._mapping)), row_position(r)) for r in rows[:limit]]
            note = explain(conn, dialect, analyzed, filters, rows[0] if rows else None, after is not None)
            return SearchResult(page, len(rows) > limit, note)

        return await self._read(read)

    async def queues(self) -> list[str]:
        """Every queue that holds a ticket, sorted."""
        return await self._read(lambda conn: [r[0] for r in conn.execute(_QUEUES)])

    async def count(self) -> int:
        async with self._session() as session:
            return int(await session.scalar(select(func.count()).select_from(Ticket)) or 0)

    async def add_all(self, tickets: Iterable[dict[str, Any]]) -> int:
        """Insert tickets (dicts of column values) in one transaction; returns how many."""
        rows = [{**t, **search_columns(t["subject"], t["body"])} for t in tickets]
        if rows:
            await self._write(lambda conn: _write_text(conn, rows, insert_rows=True))
        return len(rows)

    async def set_text(self, ticket_id: str, subject: str, body: str) -> bool:
        """Change a ticket's subject and body, keeping its search index in step;
        False when there is no such ticket. Every write of subject or body goes here."""
        row = {"id": ticket_id, "subject": subject, "body": body, **search_columns(subject, body)}
        return await self._write(lambda conn: _write_text(conn, [row], insert_rows=False)) > 0

    async def _write(self, write: Callable[[Connection], T]) -> T:
        try:
            async with asyncio.timeout(self._timeout), self._engine.begin() as conn:
                return await conn.run_sync(write)
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            log.error("ticket database unavailable", exc_info=exc)
            raise DatabaseUnavailable() from exc

    async def ping(self) -> None:
        """Raise ``DatabaseUnavailable`` unless the tickets table answers."""
        async with self._session() as session:
            await session.execute(select(Ticket.id).limit(1))


def _write_text(conn: Connection, rows: list[dict[str, Any]], *, insert_rows: bool) -> int:
    """Insert ``rows`` (whole tickets), or update subject and body of the tickets with
    their ids, with their search columns; ``search_terms`` follows. Returns how many
    tickets were written. The one write path of ticket text: the full-text indexes are
    built on the search columns (by trigger on SQLite, a generated column on PostgreSQL)."""
    delta: Counter[str] = Counter()
    written: list[dict[str, Any]] = []
    if insert_rows:
        conn.execute(insert(Ticket), rows)
        written = rows
    for row in [] if insert_rows else rows:
        old = conn.execute(
            select(_TICKETS.c.search_subject, _TICKETS.c.search_body).where(_TICKETS.c.id == row["id"])
        ).mappings().first()
        if old is None:
            continue
        delta.subtract(ticket_terms(dict(old)))
        delta[TOTAL] -= 1
        conn.execute(update(Ticket).where(Ticket.id == row["id"]).values(
            {k: row[k] for k in ("subject", "body", "search_subject", "search_body")}))
        written.append(row)
    for row in written:
        delta.update(ticket_terms(row))
    delta[TOTAL] += len(written)
    count_terms(conn, delta)
    return len(written)
