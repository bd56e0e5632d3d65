"""The shapes of the whole-ticket and customer reads (``get_ticket``, ``get_customer``,
and the resources and prompts built from them): each model is published as a tool's
output schema, so the models carry no prose; what a field means is in the tools'
descriptions and the comments here."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from ticket_server.tickets.domain import (
    AuthorType,
    EventField,
    TicketPriority,
    TicketStatus,
    Visibility,
)
from ticket_server.tickets.sla import SlaState
from ticket_server.tools.attachment_shapes import AttachmentList


class Text(BaseModel):
    untrusted: bool
    text: str
    truncated: bool


class Requester(BaseModel):
    id: str
    name: str
    email: str


class CustomerSummary(BaseModel):
    id: str
    name: str
    plan: str
    region: str
    uri: str


class Comment(BaseModel):
    author: str
    author_type: AuthorType
    # true: written through a caller that is an assistant (its text is untrusted, C36).
    by_assistant: bool
    visibility: Visibility
    created_at: datetime
    body: Text
    # The ticket a merge moved this comment from (absent: written on this ticket).
    merged_from: str | SkipJsonSchema[None] = Field(default=None, exclude_if=lambda v: v is None)


class Conversation(BaseModel):
    # comments newest first; total counts them all; truncated: more before next_cursor.
    comments: list[Comment]
    total: int
    returned: int
    truncated: bool
    next_cursor: str | None


class Event(BaseModel):
    field: EventField
    old_value: str | None
    new_value: str | None
    actor: str
    actor_type: AuthorType
    by_assistant: bool
    created_at: datetime


class SlaBreach(BaseModel):
    # A target the ticket missed (the clock of the sla field) and when it breached.
    # Derived from the SLA state at read time.
    clock: Literal["first_response", "resolution"]
    breached_at: datetime


class History(BaseModel):
    events: list[Event]
    total: int
    truncated: bool
    # Missed SLA targets, newest first (absent: the read did not derive the SLA state).
    sla_breaches: list[SlaBreach] | SkipJsonSchema[None] = Field(
        default=None, exclude_if=lambda v: v is None
    )


class Link(BaseModel):
    # A link read from this ticket (duplicate_of / duplicated_by, related, caused_by /
    # causes), to a ticket in the caller's queues.
    type: Literal["duplicate_of", "duplicated_by", "related", "caused_by", "causes"]
    ticket_id: str
    uri: str


# None (published as absent, not as null): a field that was not requested.
Absent = SkipJsonSchema[None]


class FullTicket(BaseModel):
    # `get_ticket`: id and the requested fields only; a requested field is null only
    # where the ticket has none (owner, customer).
    id: str
    subject: Text | Absent = None
    status: TicketStatus | Absent = None
    priority: TicketPriority | Absent = None
    owner: str | None = None
    queue: str | Absent = None
    created_at: datetime | Absent = None
    updated_at: datetime | Absent = None
    version: int | Absent = None
    body: Text | Absent = None
    customer: CustomerSummary | None = None
    conversation: Conversation | Absent = None
    history: History | Absent = None
    # the queue's name for people (revision 0012)
    queue_display_name: str | Absent = None
    # null: the ticket names its organisation only
    requester: Requester | None = None
    tags: list[str] | Absent = None
    custom_fields: dict[str, str | float | bool] | Absent = None
    sla: SlaState | Absent = None
    attachments: AttachmentList | Absent = None
    links: list[Link] | Absent = None


TicketField = Literal[
    "subject",
    "status",
    "priority",
    "owner",
    "queue",
    "created_at",
    "updated_at",
    "version",
    "body",
    "customer",
    "conversation",
    "history",
    "requester",
    "queue_display_name",
    "tags",
    "custom_fields",
    "sla",
    "attachments",
    "links",
]
TICKET_FIELDS: tuple[str, ...] = TicketField.__args__  # type: ignore[attr-defined]
CLASSIFICATION = ("tags", "custom_fields")
"""Fields read apart, by ``get_ticket`` (``tools.classification_reads``)."""


class CustomerTicket(BaseModel):
    id: str
    subject: Text
    status: TicketStatus
    priority: TicketPriority
    queue: str
    updated_at: datetime
    uri: str


class CustomerRead(BaseModel):
    # `get_customer`: tickets within the caller's queues, newest first.
    id: str
    name: str
    plan: str
    region: str
    billing_reference: str
    created_at: datetime
    open_tickets: list[CustomerTicket]
    open_total: int
    recent_tickets: list[CustomerTicket]
    ticket_total: int
    truncated: bool
