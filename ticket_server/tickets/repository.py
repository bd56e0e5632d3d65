"""TicketRepository: every query the tools make, over one SQLAlchemy async session each.

Driver and pool failures surface as ``DatabaseUnavailable`` so that callers can answer
"ticket database unavailable" without knowing the engine, and every query is bounded
in time by ``database_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from ticket_server.tickets.domain import DatabaseUnavailable
from ticket_server.tickets.models import Ticket
from ticket_server.tickets.schemas import TicketRecord
from ticket_server.tickets.search import (
    RANK_WINDOW, Position, SearchFilters, build_listing, build_window, search_terms,
)

log = logging.getLogger(__name__)
_TICKETS = Ticket.__table__
_RECORD_COLUMNS = [_TICKETS.c[name] for name in TicketRecord.model_fields]


class TicketRepository:
    """Queries over one engine; ``aclose()`` releases its connections."""

    def __init__(self, engine: AsyncEngine, timeout: float, rank_window: int = RANK_WINDOW) -> None:
        self._engine = engine
        self._rank_window = rank_window
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._timeout = timeout

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    async def aclose(self) -> None:
        await self._engine.dispose()

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[AsyncSession]:
        try:
            async with asyncio.timeout(self._timeout), self._sessions() as session:
                yield session
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            # The detail (SQL, DSN, path) stays in the log; callers get a plain fact.
            log.error("ticket database unavailable", exc_info=exc)
            raise DatabaseUnavailable() from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        """A plain connection (Core, no ORM session): the per-call hot path."""
        try:
            async with asyncio.timeout(self._timeout), self._engine.connect() as conn:
                yield conn
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            log.error("ticket database unavailable", exc_info=exc)
            raise DatabaseUnavailable() from exc

    async def get(self, ticket_id: str, queues: frozenset[str] | None = None) -> TicketRecord | None:
        """The ticket ``ticket_id``; None when missing or outside ``queues`` (None = all)."""
        async with self._connection() as conn:
            stmt = select(*_RECORD_COLUMNS).where(_TICKETS.c.id == ticket_id)
            if queues is not None:
                stmt = stmt.where(_TICKETS.c.queue.in_(sorted(queues)))
            row = (await conn.execute(stmt)).mappings().first()
            return TicketRecord.model_validate(dict(row)) if row is not None else None

    async def search_subject(
        self, query: str, limit: int, queues: frozenset[str] | None = None
    ) -> list[TicketRecord]:
        """Tickets whose subject contains ``query`` case-insensitively, newest first,
        only in ``queues`` (None = every queue).

        ``%`` and ``_`` in ``query`` are literal (LIKE with an escape character).
        """
        stmt = select(Ticket).where(Ticket.subject.icontains(query, autoescape=True))
        if queues is not None:
            stmt = stmt.where(Ticket.queue.in_(sorted(queues)))
        stmt = (
            stmt
            .order_by(Ticket.updated_at.desc(), Ticket.pk.desc())
            .limit(limit)
        )
        async with self._session() as session:
            rows = (await session.scalars(stmt)).all()
            return [TicketRecord.model_validate(r) for r in rows]

    async def search(
        self, query: str, filters: SearchFilters, after: Position | None, limit: int
    ) -> list[tuple[TicketRecord, Position]]:
        """One page of at most ``limit`` tickets of full-text search (see ``tickets.search``),
        each with the position a page ending on it continues from: best match first within
        each ranking window, windows newest first; an empty query lists newest first."""
        terms = search_terms(query)
        if not terms:
            async with self._session() as session:
                rows = (await session.execute(build_listing(filters, after, limit))).all()
                return [(TicketRecord.model_validate(t), Position(sort, t.pk)) for t, sort in rows]
        page: list[Position] = []
        async with self._connection() as conn:
            upto = after.window if after is not None else None
            while len(page) < limit:
                stmt = build_window(self.dialect, terms, filters, upto, self._rank_window)
                window = (await conn.execute(stmt)).all()
                if not window:
                    break
                newest = window[0].pk
                ranked = sorted(window, key=lambda row: (row.sort, row.pk))
                start = after.sort + 1 if after is not None and after.window == upto else 0
                page.extend(Position(place, ranked[place].pk, newest)
                            for place in range(start, min(len(ranked), start + limit - len(page))))
                if len(window) < self._rank_window:  # no older matches
                    break
                upto = window[-1].pk - 1
            if not page:
                return []
            stmt = select(_TICKETS.c.pk, *_RECORD_COLUMNS).where(_TICKETS.c.pk.in_([p.pk for p in page]))
            found = {row["pk"]: row for row in (await conn.execute(stmt)).mappings()}
        return [
            (TicketRecord.model_validate(dict(found[p.pk])), p) for p in page if p.pk in found
        ]

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
