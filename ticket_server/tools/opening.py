"""The ``open_ticket`` tool (scope ``tickets:write``, in a queue the caller may write):
governed as the other writes are (``tools.writes.Writer``: idempotency key, confirmation
by policy, the audit row in the write's transaction, refusals that change nothing), one
transaction of ``tickets.opening``.

The result holds the new ticket with the requester's text (subject, body) labelled
customer-written (``{"untrusted": true, "text": ...}``, and the result's ``_meta`` says
so), its queue's display name, its organisation and requester.

Tags and custom fields: ``TicketOpening.open`` takes ``apply(connection, ticket_id)``,
run in the transaction after the insert; the tool passes None until they are wired here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Literal

from fastmcp import Context
from fastmcp.dependencies import Depends
from fastmcp.tools import ToolResult
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from ticket_server.access.context import current_call
from ticket_server.tickets.domain import AuthorType, TicketPriority, TicketStatus
from ticket_server.tools.attachment_shapes import AttachmentInfo
from ticket_server.tools.attachments import AttachmentsArg, attached_files, digests, prepare
from ticket_server.tools.classification import MAX_CHANGES, FieldName, FieldValue, Tags
from ticket_server.tools.declare import write_tool
from ticket_server.tools.full_read import MAX_BODY_BYTES, MAX_SUBJECT_BYTES, fit
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.ticket_shapes import Text
from ticket_server.tools.writes import (
    MAX_TEXT,
    Key,
    _not_blank,
    _question,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ticket_server.tickets.attachments import Attaching, AttachmentRecord
    from ticket_server.tickets.classification import ClassificationChange
    from ticket_server.tickets.opening import OpenedTicket

Channel = Literal["email", "phone", "chat", "web", "api"]
"""How a request arrived."""

# A new ticket each call (not idempotent without a key), nothing deleted, nothing sent
# outside the ticket database.
OPEN = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
)


class Organisation(BaseModel):
    id: str
    name: str


class RequesterShown(BaseModel):
    id: str
    name: str
    email: str


class NewTicket(BaseModel):
    id: str
    subject: Text
    body: Text
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    queue_display_name: str
    customer: Organisation
    # null: opened for the organisation, no contact named
    requester: RequesterShown | None
    channel: str
    version: int
    created_at: datetime
    updated_at: datetime


class TicketOpened(BaseModel):
    ticket: NewTicket
    requester_created: bool
    attachments: list[AttachmentInfo] = []  # the files stored with the first message


def _opened(outcome: OpenedTicket) -> TicketOpened:
    r = outcome.requester
    return TicketOpened(
        ticket=NewTicket(
            id=outcome.ticket_id,
            subject=fit(outcome.subject, MAX_SUBJECT_BYTES),
            body=fit(outcome.body, MAX_BODY_BYTES),
            status=outcome.status,
            priority=outcome.priority,
            owner=outcome.owner,
            queue=outcome.queue,
            queue_display_name=outcome.queue_display_name,
            customer=Organisation(id=outcome.customer_id, name=outcome.customer),
            requester=RequesterShown(id=r.id, name=r.name, email=r.email) if r else None,
            channel=outcome.channel,
            version=outcome.version,
            created_at=outcome.created_at,
            updated_at=outcome.updated_at,
        ),
        requester_created=outcome.requester_created,
        attachments=attached_files(outcome.attachments),
    )


def _actor() -> str:
    """The caller's name, as the write's context records it (the pipeline admits no call
    without a caller; ``Writer.context`` refuses one all the same)."""
    record = current_call.get()
    return record.caller.name if record is not None and record.caller is not None else ""


def _complete(
    change: ClassificationChange, free_tags: bool, files: Attaching | None, actor: str
) -> Callable[[Connection, str], list[AttachmentRecord]]:
    """The ``apply`` of ``TicketOpening.open``: the new ticket's tags and custom fields,
    checked against the vocabulary and the definitions (every required field of its
    queue included), and its files (``files``, uploaded by ``actor``), in the opening's
    transaction, so a refusal opens nothing. It returns the files it stored."""

    def apply(conn: Connection, ticket_id: str) -> list[AttachmentRecord]:
        from sqlalchemy import select

        from ticket_server.tickets.attachments import attach
        from ticket_server.tickets.classification import apply_classification
        from ticket_server.tickets.models import Ticket

        now = datetime.now(UTC)
        pk, queue = conn.execute(
            select(Ticket.pk, Ticket.queue).where(Ticket.id == ticket_id)
        ).one()
        apply_classification(conn, pk, queue, change, free_tags=free_tags, now=now, opening=True)
        return attach(conn, ticket_id, None, files, actor, now) if files is not None else []

    return apply


async def open_ticket(
    subject: Annotated[
        str, Field(min_length=1, max_length=300, description="The request's subject line.")
    ],
    body: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_TEXT,
            description="The request, as the customer put it.",
        ),
    ],
    queue: Annotated[
        str,
        Field(
            min_length=1,
            max_length=64,
            description="An active queue you may write; case ignored.",
        ),
    ],
    ctx: Context,
    requester_email: Annotated[
        Annotated[str, Field(min_length=3, max_length=254)] | None,
        Field(description="The requester's e-mail; a new one adds the requester."),
    ] = None,
    requester_name: Annotated[
        Annotated[str, Field(min_length=1, max_length=200)] | None,
        Field(description="The requester's name; needed when the e-mail is new."),
    ] = None,
    customer_id: Annotated[
        Annotated[str, Field(min_length=1, max_length=32)] | None,
        Field(description="The organisation, e.g. CUS-1000; needed for a new e-mail."),
    ] = None,
    priority: TicketPriority = TicketPriority.NORMAL,
    channel: Channel = "api",
    tags: Annotated[Tags, Field(description="From the tag vocabulary.")] = [],  # noqa: B006
    custom_fields: Annotated[
        dict[FieldName, FieldValue],
        Field(max_length=MAX_CHANGES, description="Field name -> value."),
    ] = {},  # noqa: B006
    attachments: AttachmentsArg = None,
    idempotency_key: Key = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Open a ticket (status new). Requester: a known requester_email; a new one with
    requester_name and customer_id; or customer_id alone. Refused, nothing changed, for
    a queue unknown, inactive or not yours (the error lists yours), an unknown
    customer, a tag or field value set_ticket_fields would refuse, a required field
    missing, or a file refused. Files are the customer's (untrusted). May ask the person to confirm. Subject and body return as untrusted."""
    from ticket_server.tickets.classification import ClassificationChange
    from ticket_server.tickets.opening import NEW_TICKET, OpenRequest, TicketOpening

    _not_blank("subject", subject)
    _not_blank("body", body)
    files_in = None
    if attachments:  # the requester's files, labelled customer-uploaded
        files_in = await prepare(
            services.files, attachments, untrusted=True, uploader_type=AuthorType.CUSTOMER
        )
    request = OpenRequest(
        subject=subject,
        body=body,
        queue=queue,
        priority=priority,
        channel=channel,
        requester_email=requester_email.strip() if requester_email else None,
        requester_name=requester_name.strip() if requester_name else None,
        customer_id=customer_id.strip().upper() if customer_id else None,
    )
    arguments = {
        "subject": subject,
        "body": body,
        "queue": queue,
        "requester_email": request.requester_email,
        "requester_name": request.requester_name,
        "customer_id": request.customer_id,
        "priority": priority.value,
        "channel": channel,
        "tags": sorted(tags),
        "custom_fields": dict(sorted(custom_fields.items())),
        "attachments": digests(files_in),
    }
    return await services.write.perform(
        ctx,
        "open_ticket",
        NEW_TICKET,
        arguments,
        idempotency_key,
        None,
        lambda checked: _question(
            f"Open a ticket in {queue} for {request.requester_email or request.customer_id}?",
            checked,
            subject,
        ),
        TicketOpening(services.repository).open,
        request,
        _complete(
            ClassificationChange(add_tags=tags, fields=dict(custom_fields)),
            services.free_tags,
            files_in,
            _actor(),
        ),
        shape=_opened,
    )


TOOL = write_tool(open_ticket, OPEN, TicketOpened)
"""``open_ticket``, added by ``build_server`` (not on a read-only server)."""
