"""The domain's vocabulary without any database library at import: the ticket enums, the
error for an unavailable database and the one bound every query runs under. The tools
and the server's start import these; SQLAlchemy (models, repository, search) is
imported on the first query."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import StrEnum

log = logging.getLogger(__name__)


class TicketStatus(StrEnum):
    NEW = "new"
    OPEN = "open"
    IN_PROGRESS = "in_progress"
    WAITING_ON_CUSTOMER = "waiting_on_customer"
    RESOLVED = "resolved"
    CLOSED = "closed"


class TicketPriority(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


class DatabaseUnavailable(Exception):
    """The ticket database did not answer (down, locked, replaced, or too slow)."""


class SearchTooCostly(Exception):
    """A search was stopped at its own budget, shorter than the database timeout: the
    request was too broad for it, the database is fine."""


@asynccontextmanager
async def bounded(
    timeout: float, error: type[Exception] = DatabaseUnavailable, what: str = "ticket database"
) -> AsyncIterator[None]:
    """Run the block within ``timeout`` seconds; a driver, pool or network failure, or the
    deadline passing, becomes ``error()`` (the detail, which may hold SQL, a DSN or a path,
    is logged here and never reaches a client)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        async with asyncio.timeout(timeout):
            yield
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        log.error(f"{what} unavailable", exc_info=exc)
        raise error() from exc
