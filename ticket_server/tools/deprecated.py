"""The original tools, kept to their exact published contract; deprecated in favour of their
``_v2`` versions (``tools.tickets``)."""

from __future__ import annotations

import inspect
from typing import Annotated

import pydantic_core
from fastmcp.dependencies import Depends
from fastmcp.tools import Tool, ToolResult
from mcp.types import TextContent
from pydantic import Field

from ticket_server.access.context import current_queues
from ticket_server.access.policy import ToolPolicy
from ticket_server.tickets.schemas import TicketStatusV1, TicketSummaryV1
from ticket_server.tools.declare import read_tool
from ticket_server.tools.errors import domain_errors, too_long
from ticket_server.tools.full_read import fields_meta
from ticket_server.tools.lookup import find_ticket
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.versions import Deprecation, ToolVersions

MAX_QUERY_LENGTH = 500
"""Longest query the deprecated substring search takes (not in its published schema)."""
POLICY = {"search_tickets": ToolPolicy(expensive=True)}
"""What the call pipeline applies to these tools (``access/policy.py``)."""


def _described(docstring: str | None, deprecation: Deprecation) -> str:
    """The tool's description: the deprecation notice first, then its docstring."""
    return f"{deprecation.announcement()}\n\n{inspect.cleandoc(docstring or '')}"


async def get_ticket_status(
    ticket_id: Annotated[str, Field(description="Ticket id, e.g. SUP-4412.")],
    services: Services = Depends(current_services),
) -> TicketStatusV1:
    """A ticket's status by id; updated is YYYY-MM-DD (UTC). Unknown id: an error."""
    ticket = await find_ticket(services.repository, ticket_id)
    return TicketStatusV1(
        id=ticket.id, status=ticket.status, owner=ticket.owner, updated=ticket.updated_at.date()
    )


async def search_tickets(
    query: Annotated[str, Field(description="Text the subject contains (literal, any case).")],
    limit: Annotated[int, Field(ge=1, le=50, description="Most tickets, 1-50.")] = 5,
    services: Services = Depends(current_services),
) -> list[TicketSummaryV1]:
    """Tickets whose subject contains `query`, newest first; limit outside 1-50 is an error."""
    refused = too_long("search_tickets", "query", query, MAX_QUERY_LENGTH)
    if refused is not None:
        raise refused
    with domain_errors():
        hits = await services.repository.search_subject(query, limit, queues=current_queues())
    if not hits:
        # FastMCP turns an empty list into no content block at all; older clients
        # read the text block, so it must say `[]` like any other result.
        return ToolResult(  # type: ignore[return-value]
            content=[TextContent(type="text", text="[]")],
            structured_content={"result": []},
            meta={"fastmcp": {"wrap_result": True}},
        )
    # The published result stays a list of {id, subject, status}: the subjects, which
    # customers wrote, are labelled in the result's _meta only (C38).
    found = [
        TicketSummaryV1(id=t.id, subject=t.subject, status=t.status).model_dump(mode="json")
        for t in hits
    ]
    return ToolResult(  # type: ignore[return-value]
        content=[TextContent(type="text", text=pydantic_core.to_json(found).decode())],
        structured_content={"result": found},
        meta={"fastmcp": {"wrap_result": True}, **fields_meta(["result[].subject"])},
    )


_TOOLS = [read_tool(fn) for fn in (get_ticket_status, search_tickets)]


def tools(versions: ToolVersions) -> list[Tool]:
    """The original tools, each described with its retirement notice first (its date as
    the deployment's settings move it) and its deprecation in ``_meta``."""
    described: list[Tool] = []
    for tool in _TOOLS:
        d = versions.deprecations[tool.name]
        described.append(
            tool.model_copy(
                update={"description": _described(tool.description, d), "meta": d.meta()}
            )
        )
    return described
