"""What a tool is given besides its arguments: the server's repository, cursor codec, clock
and write policy, injected with FastMCP's dependency injection from the server's lifespan
context.

The tools are declared once, at module level, as ``Tool`` objects whose functions take
``services: Services = Depends(current_services)``; FastMCP leaves that parameter out of
the input schema and fills it on every call with the ``Services`` of the server serving
the call (``build_server`` yields it from its lifespan under ``LIFESPAN_KEY``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastmcp import Context
from fastmcp.dependencies import CurrentContext

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from ticket_server.tickets.repository import TicketRepository
    from ticket_server.tickets.sla import Now
    from ticket_server.tools.attachments import AttachmentService
    from ticket_server.tools.cursor import CursorCodec
    from ticket_server.tools.writes import Writer

LIFESPAN_KEY = "services"


@dataclass(frozen=True)
class Services:
    """One server's dependencies of its tools.

    ``now``: the time SLA states and ticket ages are computed at (tests fix it);
    ``writer``: runs write calls under the deployment's confirmation policy (None on a
    read-only server, which registers no write tool); ``free_tags``: whether a write may
    add a tag outside the vocabulary; ``bulk_max_tickets``: most tickets one bulk change
    selects."""

    repository: TicketRepository
    cursors: CursorCodec
    now: Now
    files: AttachmentService
    writer: Writer | None = None
    free_tags: bool = False
    bulk_max_tickets: int = 0

    @property
    def write(self) -> Writer:
        """The writer; only write tools ask, and they exist only when there is one."""
        assert self.writer is not None, "a write tool on a read-only server"
        return self.writer


def current_services(ctx: Context = CurrentContext()) -> Services:
    """The ``Services`` of the server serving this call (a ``Depends`` provider)."""
    services: Services = ctx.lifespan_context[LIFESPAN_KEY]
    return services
