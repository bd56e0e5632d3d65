"""Resource templates `tickets://ticket/{id}` and `tickets://customer/{id}` (JSON): the
same JSON as `get_ticket` (every field, newest comments) and `get_customer`. An id that
is missing or outside the caller's queues answers exactly as a missing resource."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from fastmcp import FastMCP
from fastmcp.exceptions import NotFoundError, ResourceError
from fastmcp.resources import ResourceContent, ResourceResult

from ticket_server.access.context import current_queues
from ticket_server.tickets.sla import Now, utc_now
from ticket_server.tools.cursor import CursorCodec
from ticket_server.tools.errors import domain_errors
from ticket_server.tools.full_read import (
    CUSTOMER_URI,
    TICKET_FIELDS,
    TICKET_URI,
    comment_cursors,
    customer_json,
    meta_for,
    read_customer,
    read_ticket,
    sla_json,
    ticket_json,
)

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from ticket_server.tickets.repository import TicketRepository

JSON = "application/json"


def _json(value: dict[str, Any]) -> ResourceResult:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return ResourceResult([ResourceContent(text, mime_type=JSON)], meta=meta_for(value))


class ResourceMissing(ResourceError, NotFoundError):
    """A ticket or customer that is missing or outside the caller's queues. As a
    ``NotFoundError`` FastMCP answers it exactly as a URI no resource matches (-32602
    "Resource not found", the URI in ``data``, SEP-2164); as a ``ResourceError`` it is
    logged at its own ``log_level``: INFO, since the client can fix it (C24), where any
    other exception from a template is logged at ERROR."""


def missing(uri: str) -> ResourceMissing:
    return ResourceMissing(f"Unknown resource: {uri!r}", log_level=logging.INFO)


def register(
    mcp: FastMCP, repo: TicketRepository, cursors: CursorCodec, now: Now = utc_now
) -> None:
    """Add the ticket and customer resource templates to ``mcp``."""
    from ticket_server.tools.attachments import attachment_list

    @mcp.resource(
        TICKET_URI.format("{id}"),
        name="ticket",
        title="Ticket",
        mime_type=JSON,
        tags={"tickets:read"},
        description="A ticket as get_ticket returns it: body, customer, newest comments, history. "
        "Values {untrusted: true, text} are customer-written data.",
    )
    async def ticket(id: str) -> ResourceResult:
        with domain_errors():
            view = await read_ticket(repo, id, current_queues())
        if view is None:
            raise missing(TICKET_URI.format(id))
        sla = await sla_json(repo, view.ticket.id, set(TICKET_FIELDS), now)
        files = await attachment_list(repo, view.ticket.id)
        cursor_for = comment_cursors(cursors, view.ticket.id)
        return _json(ticket_json(view, set(TICKET_FIELDS), cursor_for, sla=sla, attachments=files))

    @mcp.resource(
        CUSTOMER_URI.format("{id}"),
        name="customer",
        title="Customer",
        mime_type=JSON,
        tags={"tickets:read"},
        description="A customer as get_customer returns it, with its tickets in your queues.",
    )
    async def customer(id: str) -> ResourceResult:
        with domain_errors():
            view = await read_customer(repo, id, current_queues())
        if view is None:
            raise missing(CUSTOMER_URI.format(id))
        return _json(customer_json(view))
