"""A queue's board: its tickets counted by status and (open ones) by priority, and its
oldest open tickets. One read of synchronous Core statements, run by the repository's
``read`` (a worker thread on SQLite, ``run_sync`` on PostgreSQL)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, func, select

from ticket_server.tickets.domain import OPEN_STATUSES, TicketPriority, TicketStatus
from ticket_server.tickets.models import Ticket
from ticket_server.tickets.schemas import TicketRecord


@dataclass(frozen=True)
class QueueBoard:
    queue: str
    by_status: dict[str, int]
    """Every ticket of the queue, by status (statuses without one are absent)."""
    open_by_priority: dict[str, int]
    """The queue's open tickets (``OPEN_STATUSES``) by priority."""
    oldest_open: list[TicketRecord]
    """The open tickets created first, oldest first."""


def queue_board(conn: Connection, queue: str, limit: int) -> QueueBoard:
    """The board of ``queue``; a queue that holds no ticket has empty counts."""
    in_queue = Ticket.queue == queue
    by_status: dict[str, int] = {}
    by_priority: dict[str, int] = {}
    # One pass over the queue's rows gives both counts.
    for status, priority, n in conn.execute(
        select(Ticket.status, Ticket.priority, func.count())
        .where(in_queue)
        .group_by(Ticket.status, Ticket.priority)
    ):
        status, priority = TicketStatus(status), TicketPriority(priority)
        by_status[status.value] = by_status.get(status.value, 0) + int(n)
        if status in OPEN_STATUSES:
            by_priority[priority.value] = by_priority.get(priority.value, 0) + int(n)
    is_open = Ticket.status.in_(OPEN_STATUSES)
    rows = conn.execute(
        select(
            Ticket.id,
            Ticket.subject,
            Ticket.body,
            Ticket.status,
            Ticket.priority,
            Ticket.owner,
            Ticket.queue,
            Ticket.customer,
            Ticket.created_at,
            Ticket.updated_at,
        )
        .where(in_queue, is_open)
        .order_by(Ticket.created_at, Ticket.pk)
        .limit(limit)
    )
    oldest = [TicketRecord.model_validate(row, from_attributes=True) for row in rows]
    return QueueBoard(queue, by_status, by_priority, oldest)
