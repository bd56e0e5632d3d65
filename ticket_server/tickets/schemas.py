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
