"""Pydantic views of tickets, as the tools return them."""

from __future__ import annotations

from datetime import date, datetime

from pydantic import BaseModel, ConfigDict, Field

from ticket_server.tickets.models import TicketPriority, TicketStatus


class TicketRecord(BaseModel):
    """A whole ticket row, read-only."""

    model_config = ConfigDict(from_attributes=True, frozen=True)

    id: str
    subject: str
    body: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    customer: str
    created_at: datetime
    updated_at: datetime


class TicketStatusV1(BaseModel):
    """`get_ticket_status` result (original contract)."""

    id: str = Field(description="Ticket id, e.g. SUP-4412.")
    status: str = Field(description="new, open, in_progress, waiting_on_customer, resolved or closed.")
    owner: str | None = Field(description="Assignee login; null when unassigned.")
    updated: date = Field(description="Date of the last update, YYYY-MM-DD (UTC).")


class TicketSummaryV1(BaseModel):
    """One `search_tickets` hit (original contract)."""

    id: str
    subject: str
    status: str


class TicketStatusV2(BaseModel):
    """`get_ticket_status_v2` result: the ticket's status record."""

    id: str = Field(description="Ticket id, e.g. SUP-4412.")
    subject: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None = Field(description="Assignee login; null when unassigned.")
    queue: str = Field(description="Queue, e.g. support, billing, engineering.")
    created_at: datetime = Field(description="RFC 3339, UTC.")
    updated_at: datetime = Field(description="RFC 3339, UTC.")


class TicketSummaryV2(BaseModel):
    """One `search_tickets_v2` hit."""

    id: str
    subject: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    updated_at: datetime = Field(description="RFC 3339, UTC.")


class SearchPage(BaseModel):
    """One page of `search_tickets_v2` results."""

    tickets: list[TicketSummaryV2]
    next_cursor: str | None = Field(
        description="Pass back as `cursor` for the next page; null on the last page."
    )
