"""Finding one ticket by the id a model sent: shared by every version of the lookup tool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastmcp.exceptions import ToolError

from ticket_server.access.context import current_queues
from ticket_server.tickets.schemas import TicketRecord
from ticket_server.tools.errors import domain_errors, model_error

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from ticket_server.tickets.repository import TicketRepository

MAX_ID_LENGTH = 64


def normalise_ticket_id(ticket_id: str) -> str:
    """Ids are upper-case keys such as SUP-4412; models often send ' sup-4412'."""
    return ticket_id.strip().upper()


def not_found(ticket_id: str) -> ToolError:
    shown = ticket_id if len(ticket_id) <= MAX_ID_LENGTH else ticket_id[:MAX_ID_LENGTH] + "..."
    return model_error(
        f"No ticket with id {shown!r}. Ticket ids look like SUP-4412; "
        "use a search tool to find the id if you only know the subject."
    )


async def find_ticket(repo: TicketRepository, ticket_id: str) -> TicketRecord:
    """The ticket ``ticket_id`` as the current caller may see it; a ``ToolError`` naming
    the id when it is missing or in a queue the caller may not see (the same answer)."""
    key = normalise_ticket_id(ticket_id)
    if len(key) > MAX_ID_LENGTH:
        raise not_found(ticket_id)
    with domain_errors():
        ticket = await repo.get(key, queues=current_queues())
    if ticket is None:
        raise not_found(ticket_id)
    return ticket
