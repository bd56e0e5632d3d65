"""The domain's vocabulary without any database library at import: the ticket, comment
and history enums, the error for an unavailable database and the one bound every query
runs under. The tools and the server's start import these; SQLAlchemy (models,
repository, search) is imported on the first query."""

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


OPEN_STATUSES = frozenset({TicketStatus.NEW, TicketStatus.OPEN, TicketStatus.IN_PROGRESS, TicketStatus.WAITING_ON_CUSTOMER})
"""Statuses of a ticket still being worked on (not resolved or closed)."""


class TicketPriority(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


class AuthorType(StrEnum):
    """Who wrote a comment or made a change: the customer's side, a support agent, or
    the system (automations). Text with ``CUSTOMER`` authorship is untrusted."""

    CUSTOMER = "customer"
    AGENT = "agent"
    SYSTEM = "system"


class Visibility(StrEnum):
    """A comment's audience: ``PUBLIC`` replies reach the customer; ``INTERNAL`` notes
    are for agents only."""

    PUBLIC = "public"
    INTERNAL = "internal"


class EventField(StrEnum):
    """The ticket field a history event changed."""

    STATUS = "status"
    PRIORITY = "priority"
    OWNER = "owner"
    QUEUE = "queue"


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
