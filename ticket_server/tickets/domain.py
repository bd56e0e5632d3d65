"""The domain's vocabulary without any database library at import: the ticket, comment
and history enums, the error for an unavailable database and the one bound every query
runs under. The tools and the server's start import these; SQLAlchemy (models,
repository, search) is imported on the first query."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import StrEnum

from ticket_server import compat

log = logging.getLogger(__name__)


class TicketStatus(StrEnum):
    NEW = "new"
    OPEN = "open"
    IN_PROGRESS = "in_progress"
    WAITING_ON_CUSTOMER = "waiting_on_customer"
    RESOLVED = "resolved"
    CLOSED = "closed"


OPEN_STATUSES = frozenset(
    {
        TicketStatus.NEW,
        TicketStatus.OPEN,
        TicketStatus.IN_PROGRESS,
        TicketStatus.WAITING_ON_CUSTOMER,
    }
)
"""Statuses of a ticket still being worked on (not resolved or closed)."""


class TicketPriority(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


class AuthorType(StrEnum):
    """Who wrote a comment or made a change: the customer's side, a support agent, or
    the system (automations). What a caller of kind assistant writes is ``AGENT`` with
    ``by_assistant`` set (the published enum stays as it was: a new value would break
    clients that validate it). Text with ``CUSTOMER`` authorship, or by an assistant (it
    may repeat a customer's words), is untrusted."""

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
        async with compat.deadline(timeout):
            yield
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        log.error(f"{what} unavailable", exc_info=exc)
        raise error() from exc


# --- the write path's rules and refusals ---------------------------------------------

NEXT_STATUSES: dict[TicketStatus, tuple[TicketStatus, ...]] = {
    TicketStatus.NEW: (
        TicketStatus.OPEN,
        TicketStatus.IN_PROGRESS,
        TicketStatus.WAITING_ON_CUSTOMER,
        TicketStatus.RESOLVED,
        TicketStatus.CLOSED,
    ),
    TicketStatus.OPEN: (
        TicketStatus.IN_PROGRESS,
        TicketStatus.WAITING_ON_CUSTOMER,
        TicketStatus.RESOLVED,
        TicketStatus.CLOSED,
    ),
    TicketStatus.IN_PROGRESS: (
        TicketStatus.OPEN,
        TicketStatus.WAITING_ON_CUSTOMER,
        TicketStatus.RESOLVED,
        TicketStatus.CLOSED,
    ),
    TicketStatus.WAITING_ON_CUSTOMER: (
        TicketStatus.OPEN,
        TicketStatus.IN_PROGRESS,
        TicketStatus.RESOLVED,
        TicketStatus.CLOSED,
    ),
    TicketStatus.RESOLVED: (TicketStatus.OPEN, TicketStatus.CLOSED),
    TicketStatus.CLOSED: (),
}
"""The statuses a ticket may move to from each status (a closed ticket is final: a
returning problem is a new ticket). Nothing moves back to ``new``."""


class WriteRefused(Exception):
    """A write the domain refuses; nothing was changed. ``str()`` is the model-readable
    reason; ``reason`` a short label for the audit trail."""

    reason = "refused"


class TicketNotWritable(WriteRefused):
    """No ticket of that id in the queues the caller may write."""

    reason = "ticket not found"


class QueueNotWritable(WriteRefused):
    """The target queue of an escalation is outside the caller's writable queues."""

    reason = "queue not writable"


class IllegalTransition(WriteRefused):
    reason = "illegal status transition"

    def __init__(self, current: TicketStatus, wanted: TicketStatus) -> None:
        allowed = NEXT_STATUSES[current]
        self.allowed = allowed
        nexts = (
            ", ".join(s.value for s in allowed) if allowed else "none (a closed ticket is final)"
        )
        super().__init__(
            f"A ticket cannot move from {current.value} to {wanted.value}; "
            f"allowed next statuses from {current.value}: {nexts}."
        )


CLOSED_RULE = (
    "a closed ticket is final: it takes internal notes only (no reply, assignment, escalation "
    "or status change; a returning problem is a new ticket)"
)
"""The one rule for closed tickets, as every refusal of it says."""


class TicketClosed(WriteRefused):
    """A write other than an internal note to a closed ticket (``CLOSED_RULE``)."""

    reason = "ticket closed"

    def __init__(self, ticket_id: str) -> None:
        super().__init__(
            f"Ticket {ticket_id} has status closed; {CLOSED_RULE}. Nothing was changed."
        )


class NoChange(WriteRefused):
    """The write would change nothing (e.g. the owner is already that login)."""

    reason = "no change"


class StaleVersion(WriteRefused):
    """``expected_version`` is not the ticket's version: it changed meanwhile.
    ``current`` holds the ticket's current fields (and ``version``)."""

    reason = "stale version"

    def __init__(self, expected: int, current: dict[str, object]) -> None:
        self.current = current
        super().__init__(
            f"The ticket changed since version {expected}: it is now version {current['version']} "
            f"(status {current['status']}, priority {current['priority']}, owner {current['owner']}, "
            f"queue {current['queue']}). Read it again and decide whether your change still applies."
        )


class IdempotencyConflict(WriteRefused):
    """The idempotency key was used before with another tool or other arguments."""

    reason = "idempotency key reused"

    def __init__(self) -> None:
        super().__init__(
            "This idempotency_key was already used for a different request; use a new key "
            "for a new write (reuse a key only to retry the exact same call)."
        )


class ConfirmationSpent(WriteRefused):
    """The person's confirmation was already used for a write (a replayed request state)."""

    reason = "confirmation replayed"

    def __init__(self) -> None:
        super().__init__(
            "This confirmation was already used; nothing was changed. Call the tool again "
            "(without the old request state) to ask the person afresh."
        )


class LinkType(StrEnum):
    """A typed relation from one ticket to another, as stored (``ticket_links``):
    ``duplicate_of`` (this ticket repeats the other), ``related``, ``caused_by``. Read
    from the other ticket, a link is its inverse (``INVERSE_LINKS``)."""

    DUPLICATE_OF = "duplicate_of"
    RELATED = "related"
    CAUSED_BY = "caused_by"


LINK_NAMES = ("duplicate_of", "duplicated_by", "related", "caused_by", "causes")
"""A link as a caller names it, from the ticket it is read on."""
INVERSE_LINKS = {
    "duplicate_of": "duplicated_by",
    "duplicated_by": "duplicate_of",
    "related": "related",
    "caused_by": "causes",
    "causes": "caused_by",
}


class AlreadyMerged(WriteRefused):
    """The ticket was merged into another already (or is the target of itself)."""

    reason = "already merged"
