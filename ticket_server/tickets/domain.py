"""The domain's vocabulary without any database library: the ticket enums and the
error for an unavailable database. The tools and the server's start import these;
SQLAlchemy (models, repository, search) is imported on the first query."""

from __future__ import annotations

from enum import StrEnum


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
