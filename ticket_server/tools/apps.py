"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension): a ticket card and a queue
board, shown by hosts that render apps (Claude, ChatGPT, VS Code, Goose, Postman).

Both are one self-contained HTML document (``views/app.html``: inline script and style,
nothing fetched) served as two ``ui://`` resources with a strict CSP in their ``_meta``.
``get_ticket`` names the card in its tools/list ``_meta.ui.resourceUri``; the board is
the view of ``get_queue_board``, an app-only tool (``visibility: ["app"]``) the card and
the board call through the host. Every action of a view calls the write tools through
the host's ``tools/call``, so scopes, confirmation, limits and audit apply unchanged.

Only a client that negotiates the extension (in its initialize capabilities, or in a
request's ``_meta`` under 2026-07-28) sees any of it: for any other client tools/list,
resources/list and every result are exactly what they were without this module, and
``get_queue_board`` answers like an unknown tool (``AppsGate``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Annotated, Any

from fastmcp import FastMCP
from fastmcp.apps import UI_EXTENSION_ID, UI_MIME_TYPE, AppConfig, ResourceCSP
from fastmcp.apps.config import app_config_to_meta_dict, is_model_visible
from fastmcp.dependencies import Depends
from fastmcp.exceptions import NotFoundError, to_mcp_error
from fastmcp.resources import ResourceContent, ResourceResult
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp import types as mt
from pydantic import BaseModel, Field

from ticket_server.access.callers import Caller
from ticket_server.access.context import current_caller, current_queues
from ticket_server.access.policy import ToolPolicy
from ticket_server.tickets.domain import NEXT_STATUSES, TicketPriority, TicketStatus
from ticket_server.tools.declare import read_tool
from ticket_server.tools.errors import domain_errors, model_error
from ticket_server.tools.full_read import TICKET_URI, fit, meta_for
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.ticket_shapes import Text

POLICY = {"get_queue_board": ToolPolicy(expensive=True)}
"""What the call pipeline applies to this module's tools (``access/policy.py``)."""

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from fastmcp.server.context import Context


CARD_URI = "ui://ticket-server/ticket-card.html"
BOARD_URI = "ui://ticket-server/queue-board.html"
BOARD_TOOL = "get_queue_board"
APP_META = "dev.ticket-server/app"
"""The result ``_meta`` key that tells a view what its caller may do on the ticket."""
ACTIONS = ("add_internal_note", "reply_to_customer", "set_ticket_status", "assign_ticket")
"""The write tools a ticket card offers, each only to a caller the tool would admit."""
VIEWS = {"get_ticket": CARD_URI}
"""The model-facing tools whose tools/list entry names a view (to clients with the
extension only)."""
APP_ONLY = frozenset({BOARD_TOOL})
BOARD_LIMIT = 10
# No origin at all: nothing is fetched, framed or loaded from outside the document.
CSP = ResourceCSP(connect_domains=[], resource_domains=[], frame_domains=[], base_uri_domains=[])
VIEW_CONFIG = AppConfig(csp=CSP, prefers_border=True)


@cache
def view_html(view: str) -> str:
    """The app document for ``view`` (``card`` or ``board``)."""
    template = files("ticket_server.tools").joinpath("views/app.html").read_text("utf-8")
    return template.replace('data-view="card"', f'data-view="{view}"', 1)


def negotiated(ctx: Context | None) -> bool:
    """Whether the client of this request negotiated the MCP Apps extension: declared
    at initialize (legacy revisions) or in this request's ``_meta`` (2026-07-28)."""
    if ctx is None:
        return False
    return ctx.client_extension_settings(
        UI_EXTENSION_ID
    ) is not None or ctx.client_supports_extension(UI_EXTENSION_ID)


def _linked(tool: Tool) -> Tool:
    uri = VIEWS.get(tool.name)
    if uri is None:
        return tool
    ui = {**((tool.meta or {}).get("ui") or {}), "resourceUri": uri}
    return tool.model_copy(update={"meta": {**(tool.meta or {}), "ui": ui}})


class AppsGate(Middleware):
    """What of the apps a request sees: nothing unless its client negotiated the
    extension; then the views named on their tools and the card's permitted actions."""

    def __init__(self, may_use: Callable[[Caller | None, Tool], bool]) -> None:
        self.may_use = may_use
        # The server's tools are fixed once it is built (FastMCP's get_tool runs the
        # providers again on every call): each looked up once, by name.
        self._tools: dict[str, Tool | None] = {}

    async def _tool(self, server: FastMCP, name: str) -> Tool | None:
        if name not in self._tools:
            self._tools[name] = await server.get_tool(name)
        return self._tools[name]

    async def on_list_tools(
        self,
        context: MiddlewareContext[mt.ListToolsRequest],
        call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        if negotiated(context.fastmcp_context):
            return [_linked(t) for t in tools]
        return [t for t in tools if is_model_visible(t)]

    async def on_list_resources(
        self, context: MiddlewareContext[Any], call_next: CallNext[Any, Sequence[Any]]
    ) -> Sequence[Any]:
        resources = await call_next(context)
        if negotiated(context.fastmcp_context):
            return resources
        return [r for r in resources if not str(r.uri).startswith("ui://")]

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        name = context.message.name
        apps = negotiated(context.fastmcp_context)
        if name in APP_ONLY and not apps:
            raise to_mcp_error(NotFoundError(f"Unknown tool: {name!r}"))
        result = await call_next(context)
        if not apps or name != "get_ticket" or result.is_error:
            return result
        server = context.fastmcp_context.fastmcp if context.fastmcp_context else None
        value = result.structured_content or {}
        allowed = await self._actions(server, value.get("queue"), value.get("status"))
        meta = {**(result.meta or {}), APP_META: allowed}
        return ToolResult(
            content=result.content, structured_content=result.structured_content, meta=meta
        )

    async def _actions(self, server: FastMCP | None, queue: Any, status: Any) -> dict[str, Any]:
        """The card's actions on a ticket of ``queue`` in ``status`` for the current caller:
        each write tool it may use (scopes, toolsets) where it may write
        (``writable_queues``) and that the ticket's status admits (a closed ticket takes
        internal notes only; ``statuses``: the moves allowed from ``status``)."""
        caller = current_caller()
        actions: list[str] = []
        board = False
        current = TicketStatus(status) if status in set(TicketStatus) else None
        statuses = [s.value for s in NEXT_STATUSES[current]] if current is not None else []
        admitted = {
            "add_internal_note": current is not None,
            "reply_to_customer": current not in (None, TicketStatus.CLOSED),
            "set_ticket_status": bool(statuses),
            "assign_ticket": current not in (None, TicketStatus.CLOSED),
        }
        if server is not None and caller is not None:
            writable = caller.writable_queues
            for name in ACTIONS:
                tool = await self._tool(server, name)
                if (
                    admitted[name]
                    and tool is not None
                    and self.may_use(caller, tool)
                    and isinstance(queue, str)
                    and (writable is None or queue in writable)
                ):
                    actions.append(name)
            tool = await self._tool(server, BOARD_TOOL)
            board = tool is not None and self.may_use(caller, tool)
        return {
            "actions": actions,
            "statuses": statuses,
            "board": board,
        }


# --- the queue board -------------------------------------------------------------------


class BoardTicket(BaseModel):
    id: str
    subject: Text
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    created_at: datetime
    updated_at: datetime
    uri: str


class Board(BaseModel):
    # by_status: every ticket of the queue; open_by_priority: its open ones only.
    queue: str
    by_status: dict[str, int]
    open_by_priority: dict[str, int]
    open_total: int
    oldest_open: list[BoardTicket]
    generated_at: datetime
    # From the SLA policy (tools.backlog.queue_overview): open tickets whose first response
    # or resolution falls due within two hours, and how many open ones have breached;
    # null when no number can be given (the overview's sla_note says why).
    breaching_soon: list[dict[str, Any]] | None = None
    breached: int | None = None


def _board_result(value: dict[str, Any]) -> ToolResult:
    import json

    text = mt.TextContent(
        type="text", text=json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    )
    return ToolResult(content=[text], structured_content=value, meta=meta_for(value))


def _view(uri: str, view: str) -> ResourceResult:
    return ResourceResult(
        [
            ResourceContent(
                view_html(view),
                mime_type=UI_MIME_TYPE,
                meta={"ui": app_config_to_meta_dict(VIEW_CONFIG)},
            )
        ]
    )


def register(mcp: FastMCP, may_use: Callable[[Caller | None, Tool], bool]) -> None:
    """Add the views and their gate (``AppsGate``) to ``mcp``;
    ``may_use`` is the pipeline's: whether a caller may see and call a tool."""
    mcp.add_middleware(AppsGate(may_use))

    @mcp.resource(
        CARD_URI,
        name="ticket_card",
        title="Ticket card",
        mime_type=UI_MIME_TYPE,
        app=VIEW_CONFIG,
        tags={"tickets:read"},
        description="MCP Apps view of a get_ticket result: the ticket, its conversation "
        "and the actions the caller may take.",
    )
    async def ticket_card() -> ResourceResult:
        return _view(CARD_URI, "card")

    @mcp.resource(
        BOARD_URI,
        name="queue_board",
        title="Queue board",
        mime_type=UI_MIME_TYPE,
        app=VIEW_CONFIG,
        tags={"tickets:read"},
        description="MCP Apps view of a queue: counts by status and priority, oldest open "
        "tickets, each opening its ticket card.",
    )
    async def queue_board_view() -> ResourceResult:
        return _view(BOARD_URI, "board")


async def get_queue_board(
    queue: Annotated[str, Field(min_length=1, max_length=64, description="e.g. billing")],
    services: Services = Depends(current_services),
) -> Board:
    """A queue's board, for the queue board view: tickets by status, open tickets by
    priority, and the 10 oldest open ones. A queue outside yours: an error."""
    from ticket_server.tickets.board import queue_board
    from ticket_server.tickets.search import resolve_queue

    # The queue as the other tools name it (any case, accents ignored), among the caller's.
    readable = current_queues()
    with domain_errors():
        visible = sorted(readable) if readable is not None else await services.repository.queues()
    names = resolve_queue(queue, visible)
    if names is None:
        raise model_error(f"No queue {queue[:64]!r} among the queues you may read.")
    name = names[0]
    with domain_errors():
        board = await services.repository.read(lambda conn: queue_board(conn, name, BOARD_LIMIT))
    value = Board(
        queue=name,
        # In workflow order (new ... closed) and rising priority, as the view shows them.
        by_status={s: board.by_status[s] for s in TicketStatus if s in board.by_status},
        open_by_priority={
            p: board.open_by_priority[p] for p in TicketPriority if p in board.open_by_priority
        },
        open_total=sum(board.open_by_priority.values()),
        oldest_open=[
            BoardTicket(
                id=t.id,
                subject=fit(t.subject, 400),
                status=t.status,
                priority=t.priority,
                owner=t.owner,
                created_at=t.created_at,
                updated_at=t.updated_at,
                uri=TICKET_URI.format(t.id),
            )
            for t in board.oldest_open
        ],
        generated_at=datetime.now(UTC),
    ).model_dump(mode="json")
    from ticket_server.tools.backlog import queue_overview

    overview = await queue_overview(services.repository, name, datetime.now(UTC))
    if overview is not None:
        value["breaching_soon"] = overview["breaching_soon"]
        value["breached"] = overview["breached"]
    return _board_result(value)  # type: ignore[return-value]


TOOL = read_tool(
    get_queue_board, Board, meta={"ui": {"resourceUri": BOARD_URI, "visibility": ["app"]}}
)
"""The queue board's data tool (app-only: the view calls it), added by ``build_server``."""
