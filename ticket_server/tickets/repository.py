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
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, bindparam, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from ticket_server.tickets.domain import SearchTooCostly, bounded
from ticket_server.tickets.models import Ticket
from ticket_server.tickets.schemas import TicketRecord
from ticket_server.tickets.search import (
    RANK_WINDOW, Position, SearchFilters, build_listing, build_window, search_terms,
)

log = logging.getLogger(__name__)
_TICKETS = Ticket.__table__
_RECORD_COLUMNS = [_TICKETS.c[name] for name in TicketRecord.model_fields]
_GET = select(*_RECORD_COLUMNS).where(_TICKETS.c.id == bindparam("ticket_id"))
T = TypeVar("T")
SUBSTRING_SEARCH_SECONDS = 1.0
"""Most seconds one deprecated substring search may scan on SQLite."""


class TicketRepository:
    """Queries over one engine; ``aclose()`` releases its connections.

    ``reader``, for SQLite, is a synchronous (pysqlite) engine on the same file: each
    read then costs one worker-thread hop, where aiosqlite makes one per DBAPI call
    (cursor, execute, fetch, close, rollback), which was most of a ticket lookup's
    cost under concurrent callers.
    """

    def __init__(
        self, engine: AsyncEngine, timeout: float, rank_window: int = RANK_WINDOW, reader: Engine | None = None
    ) -> None:
        self._engine = engine
        self._reader = reader
        self._rank_window = rank_window
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._timeout = timeout

    @property
    def rank_window(self) -> int:
        """How many of the newest matches a ranked search ranks together."""
        return self._rank_window

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    async def aclose(self) -> None:
        await self._engine.dispose()
        if self._reader is not None:
            self._reader.dispose()

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[AsyncSession]:
        async with bounded(self._timeout), self._sessions() as session:
            yield session

    async def _read(self, read: Callable[[Connection], T]) -> T:
        """``read(connection)``, a function of synchronous SQLAlchemy Core calls, as one
        read: in a worker thread on the SQLite reader, else on an async connection via
        ``run_sync`` (asyncpg, no thread)."""
        async with bounded(self._timeout):
            if self._reader is not None:
                return await self._read_in_thread(read)
            async with self._engine.connect() as conn:
                return await conn.run_sync(read)

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

        if self._reader is None:  # PostgreSQL: the pg_trgm index serves the pattern
            return await self._read(read)
        # SQLite scans every subject: the scan is stopped (interrupted) at its own budget,
        # so a burst of them cannot hold the worker threads other callers' reads need.
        try:
            async with asyncio.timeout(min(SUBSTRING_SEARCH_SECONDS, self._timeout / 2)):
                return await self._read(read)
        except TimeoutError as exc:
            raise SearchTooCostly() from exc

    async def search(
        self, query: str, filters: SearchFilters, after: Position | None, limit: int
    ) -> list[tuple[TicketRecord, Position]]:
        """One page of at most ``limit`` tickets of full-text search (see ``tickets.search``),
        each with the position a page ending on it continues from: best match first within
        each ranking window, windows newest first; an empty query lists newest first."""
        terms = search_terms(query)
        dialect, size = self.dialect, self._rank_window

        def listing(conn: Connection) -> list[tuple[TicketRecord, Position]]:
            rows = conn.execute(build_listing(filters, after, limit)).mappings()
            return [(TicketRecord.model_validate(dict(r)), Position(r["sort"], r["pk"])) for r in rows]

        def ranked(conn: Connection) -> list[tuple[TicketRecord, Position]]:
            page: list[Position] = []
            upto = after.window if after is not None else None
            while len(page) < limit:
                window = conn.execute(build_window(dialect, terms, filters, upto, size)).all()
                if not window:
                    break
                newest = window[0].pk
                order = sorted(window, key=lambda row: (row.sort, row.pk))
                start = after.sort + 1 if after is not None and after.window == upto else 0
                page.extend(Position(place, order[place].pk, newest)
                            for place in range(start, min(len(order), start + limit - len(page))))
                if len(window) < size:  # no older matches
                    break
                upto = window[-1].pk - 1
            if not page:
                return []
            stmt = select(_TICKETS.c.pk, *_RECORD_COLUMNS).where(_TICKETS.c.pk.in_([p.pk for p in page]))
            found = {row["pk"]: row for row in conn.execute(stmt).mappings()}
            return [(TicketRecord.model_validate(dict(found[p.pk])), p) for p in page if p.pk in found]

        return await self._read(ranked if terms else listing)

    async def count(self) -> int:
        async with self._session() as session:
            return int(await session.scalar(select(func.count()).select_from(Ticket)) or 0)

    async def add_all(self, tickets: Iterable[dict[str, Any]]) -> int:
        """Insert tickets (dicts of column values) in one transaction; returns how many."""
        rows = list(tickets)
        if rows:
            async with self._session() as session, session.begin():
                await session.execute(insert(Ticket), rows)
        return len(rows)

    async def ping(self) -> None:
        """Raise ``DatabaseUnavailable`` unless the tickets table answers."""
        async with self._session() as session:
            await session.execute(select(Ticket.id).limit(1))
