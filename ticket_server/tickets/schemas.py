"""Pydantic views of tickets, as the tools return them."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from ticket_server.tickets.domain import (
    AuthorType,
    EventField,
    TicketPriority,
    TicketStatus,
    Visibility,
)


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
    # One `search_tickets_v2` hit. sla_due_at: the next SLA due time (first response,
    # else resolution, not yet met; past: overdue); absent without one (no target, met,
    # or paused).
    id: str
    subject: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    updated_at: datetime
    sla_due_at: datetime | SkipJsonSchema[None] = Field(
        default=None, exclude_if=lambda v: v is None
    )


class SearchHit(TicketSummaryV2):
    # matched_in: where the words were found, for a search of the conversation with
    # words only (absent otherwise, so the default search's hits keep their shape).
    matched_in: list[Literal["subject", "body", "comment"]] | SkipJsonSchema[None] = Field(
        default=None, exclude_if=lambda v: v is None
    )


_SUBJECT: list[Literal["subject"]] = ["subject"]


class SearchPage(BaseModel):
    # One page of `search_tickets_v2` results; next_cursor is null on the last page;
    # note says what the search did with words or filters that matched nothing;
    # untrusted_fields names the hit fields customers wrote (C38: labelled, not reshaped,
    # so that the published `subject: string` stays as it is).
    untrusted_fields: list[Literal["subject"]] = Field(default_factory=lambda: _SUBJECT.copy())
    tickets: list[SearchHit]
    next_cursor: str | None
    note: str | None = None


# --- records of the conversation, history and customers (read-only) -------------------


class CustomerRecord(BaseModel):
    model_config = ConfigDict(from_attributes=True, frozen=True)

    id: str
    name: str
    plan: str
    region: str
    billing_reference: str
    created_at: datetime


class RequesterRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    email: str


class CommentRecord(BaseModel):
    model_config = ConfigDict(from_attributes=True, frozen=True)

    pk: int
    author: str
    author_type: AuthorType
    visibility: Visibility
    body: str
    created_at: datetime
    by_assistant: bool = False
    merged_from: str | None = None


class LinkRecord(BaseModel):
    """A link as read from one ticket (``tickets.links``): its name from this side, the
    other ticket, who made it and when."""

    model_config = ConfigDict(frozen=True)

    type: Literal["duplicate_of", "duplicated_by", "related", "caused_by", "causes"]
    ticket_id: str
    actor: str
    created_at: datetime


class EventRecord(BaseModel):
    model_config = ConfigDict(from_attributes=True, frozen=True)

    field: EventField
    old_value: str | None
    new_value: str | None
    actor: str
    actor_type: AuthorType
    created_at: datetime
    by_assistant: bool = False


class TicketView(BaseModel):
    """A ticket with its version, customer record (None: the organisation has none), one
    page of comments (newest first), the latest events (newest first) and both totals."""

    model_config = ConfigDict(frozen=True)

    ticket: TicketRecord
    version: int
    customer: CustomerRecord | None
    comments: list[CommentRecord]
    comment_total: int
    events: list[EventRecord]
    event_total: int
    queue_display_name: str | None = None
    requester: RequesterRecord | None = None
    links: list[LinkRecord] = Field(default_factory=list)


class CustomerView(BaseModel):
    """A customer with its tickets in the caller's queues: open ones and the most recently
    updated ones (newest first), with how many there are of each."""

    model_config = ConfigDict(frozen=True)

    customer: CustomerRecord
    open_tickets: list[TicketRecord]
    open_total: int
    recent_tickets: list[TicketRecord]
    ticket_total: int
