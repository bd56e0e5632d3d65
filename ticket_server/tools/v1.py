"""The original tools, kept to their exact published contract."""

from __future__ import annotations

from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from ticket_server.tickets.repository import TicketRepository
from ticket_server.tickets.schemas import TicketStatusV1, TicketSummaryV1
from ticket_server.tools import READ_ONLY
from ticket_server.tools.errors import domain_errors

MAX_ID_LENGTH = 64


def normalise_ticket_id(ticket_id: str) -> str:
    """Ids are upper-case keys such as SUP-4412; models often send ' sup-4412'."""
    return ticket_id.strip().upper()


def not_found(ticket_id: str) -> ToolError:
    shown = ticket_id if len(ticket_id) <= MAX_ID_LENGTH else ticket_id[:MAX_ID_LENGTH] + "..."
    return ToolError(
        f"No ticket with id {shown!r}. Ticket ids look like SUP-4412; "
        "use a search tool to find the id if you only know the subject."
    )


def register(mcp: FastMCP, repo: TicketRepository) -> None:
    """Add the original tools to ``mcp``."""

    @mcp.tool(name="get_ticket_status", annotations=READ_ONLY, tags={"tickets:read"})
    async def get_ticket_status(
        ticket_id: Annotated[str, Field(description="Ticket id, e.g. SUP-4412 (case-insensitive).")],
    ) -> TicketStatusV1:
        """Look up one support ticket's current status by its id.

        Returns {id, status, owner, updated}: status is one of new, open, in_progress,
        waiting_on_customer, resolved, closed; owner is the assignee's login or null
        when unassigned; updated is the date of the last change, YYYY-MM-DD (UTC).
        An unknown id is an error naming the id.
        """
        key = normalise_ticket_id(ticket_id)
        if len(key) > MAX_ID_LENGTH:
            raise not_found(ticket_id)
        with domain_errors():
            ticket = await repo.get(key)
        if ticket is None:
            raise not_found(ticket_id)
        return TicketStatusV1(
            id=ticket.id, status=ticket.status, owner=ticket.owner, updated=ticket.updated_at.date()
        )

    @mcp.tool(name="search_tickets", annotations=READ_ONLY, tags={"tickets:read"})
    async def search_tickets(
        query: Annotated[
            str,
            Field(description="Text to find in ticket subjects; matched literally, case-insensitively."),
        ],
        limit: Annotated[
            int, Field(ge=1, le=50, description="Most tickets to return, 1 to 50.")
        ] = 5,
    ) -> list[TicketSummaryV1]:
        """Find support tickets whose subject contains the query text.

        The match is a case-insensitive substring of the subject; every character is
        literal (% and _ included). Returns at most `limit` tickets (1 to 50, default 5),
        most recently updated first, each {id, subject, status}; an empty list when
        nothing matches. A limit outside 1..50 is an error naming the bound.
        """
        with domain_errors():
            hits = await repo.search_subject(query, limit)
        return [TicketSummaryV1(id=t.id, subject=t.subject, status=t.status) for t in hits]
