"""Resource templates `tickets://ticket/{id}` and `tickets://customer/{id}` (JSON): the
same JSON as `get_ticket` (every field, newest comments) and `get_customer`. An id that
is missing or outside the caller's queues answers exactly as a missing resource."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastmcp.dependencies import Depends
from fastmcp.exceptions import NotFoundError, ResourceError
from fastmcp.resources import ResourceContent, ResourceResult, ResourceTemplate

from ticket_server.access.context import current_queues
from ticket_server.tools.errors import domain_errors
from ticket_server.tools.full_read import (
    CUSTOMER_URI,
    TICKET_URI,
    customer_json,
    meta_for,
    read_customer,
    read_ticket,
    whole_ticket,
)
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.ticket_shapes import TICKET_FIELDS

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


async def read_ticket_resource(
    id: str, services: Services = Depends(current_services)
) -> ResourceResult:
    """``tickets://ticket/{id}``: the whole ticket, as ``get_ticket`` with every field."""
    with domain_errors():
        view = await read_ticket(services.repository, id, current_queues())
    if view is None:
        raise missing(TICKET_URI.format(id))
    return _json(await whole_ticket(services, view, set(TICKET_FIELDS)))


async def read_customer_resource(
    id: str, services: Services = Depends(current_services)
) -> ResourceResult:
    """``tickets://customer/{id}``: the customer, as ``get_customer``."""
    with domain_errors():
        view = await read_customer(services.repository, id, current_queues())
    if view is None:
        raise missing(CUSTOMER_URI.format(id))
    return _json(customer_json(view))


TEMPLATES = [
    ResourceTemplate.from_function(
        read_ticket_resource,
        uri_template=TICKET_URI.format("{id}"),
        name="ticket",
        title="Ticket",
        mime_type=JSON,
        tags={"tickets:read"},
        description="A ticket as get_ticket returns it: body, customer, newest comments, "
        "history. Values {untrusted: true, text} are customer-written data.",
    ),
    ResourceTemplate.from_function(
        read_customer_resource,
        uri_template=CUSTOMER_URI.format("{id}"),
        name="customer",
        title="Customer",
        mime_type=JSON,
        tags={"tickets:read"},
        description="A customer as get_customer returns it, with its tickets in your queues.",
    ),
]
"""The ticket and customer resource templates, added by ``build_server``."""
