"""Pydantic views of tickets, as the tools return them."""

from __future__ import annotations

from datetime import date, datetime

from pydantic import BaseModel, ConfigDict

from ticket_server.tickets.domain import TicketPriority, TicketStatus


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


# The tool results below are documented in their tools' descriptions; their output
# schemas carry no prose of their own (class docstrings and field descriptions would be
# sent again with every tools/list), hence comments rather than docstrings.


class TicketStatusV1(BaseModel):
    # `get_ticket_status` result (original contract).
    id: str
    status: str
    owner: str | None
    updated: date


class TicketSummaryV1(BaseModel):
    # One `search_tickets` hit (original contract).
    id: str
    subject: str
    status: str


class TicketStatusV2(BaseModel):
    # `get_ticket_status_v2` result: the ticket's status record; times RFC 3339 UTC.
    id: str
    subject: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    created_at: datetime
    updated_at: datetime


class TicketSummaryV2(BaseModel):
    # One `search_tickets_v2` hit.
    id: str
    subject: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    updated_at: datetime


class SearchPage(BaseModel):
    # One page of `search_tickets_v2` results; next_cursor is null on the last page;
    # note says what the search did with words or filters that matched nothing.
    tickets: list[TicketSummaryV2]
    next_cursor: str | None
    note: str | None = None
