"""build_server(settings) -> FastMCP: the one place that wires every room together."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, cast

from fastmcp import FastMCP
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp import types as mt

from ticket_server import __version__
from ticket_server.access.control import AccessControl
from ticket_server.checks import CheckFailed, StartupChecks
from ticket_server.db import DeferredRepository
from ticket_server.settings import Settings
from ticket_server.access.deprecation import Clock, Deprecation, DeprecationMiddleware, utc_today
from ticket_server.tools import capabilities, completions, full_read, manifest, prompts, resources, scope, v1, v2
from ticket_server.tools.cursor import CursorCodec
from ticket_server.tools.errors import ArgumentErrorMiddleware

if TYPE_CHECKING:
    from ticket_server.tickets.repository import TicketRepository

INSTRUCTIONS = """\
This server reads a support organisation's ticket database (read-only). Use
get_ticket_status_v2 to look up a ticket by its id (ids look like SUP-4412) and
search_tickets_v2 to find tickets by words in their subject and body, with filters and
pages, when you do not know the id; get_ticket_status and search_tickets are deprecated.
Tickets have a status (new, open, in_progress, waiting_on_customer, resolved, closed), a
priority (low, normal, high, urgent), an owner (assignee login) and a queue (support,
billing, engineering, ...). Errors come back as tool results that say what to change."""


def deprecations(settings: Settings) -> dict[str, Deprecation]:
    """The deprecated tools: replacements from the tools, dates from the settings."""
    return {
        name: Deprecation(name, replacement, settings.retirement_dates[name], arguments)
        for name, (replacement, arguments) in v1.REPLACEMENTS.items()
    }


class StartupGate(Middleware):
    """Outermost: tools/list and tools/call wait until ``ready`` (the start-up checks)."""

    def __init__(self, ready: Callable[[], Awaitable[None]]) -> None:
        self.ready = ready

    async def on_list_tools(
        self, context: MiddlewareContext[mt.ListToolsRequest], call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        await self.ready()
        return await call_next(context)

    async def on_call_tool(
        self, context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        await self.ready()
        return await call_next(context)


def build_server(
    settings: Settings, repo: TicketRepository | None = None, *, clock: Clock = utc_today,
    access: AccessControl | None = None, ready: Callable[[], Awaitable[None]] | None = None,
) -> FastMCP:
    """The ticket server for ``settings``, on ``repo`` or a repository of its own.

    The repository's pooled connections are released whenever the server stops
    (disposal keeps it usable: the next query reconnects); its own repository is made
    on the first query. ``clock`` gives today's date (UTC) for retirement decisions;
    tests move it. ``ready``, when given, is awaited before any tools/list or tools/call.
    """
    retiring = deprecations(settings)
    # The deferred repository stands in for one (it forwards every attribute).
    repository = repo or cast("TicketRepository", DeferredRepository(settings))

    # Callers, authorization, rate limits and audit (the same on every transport).
    access = access or AccessControl(settings)

    @asynccontextmanager
    async def lifespan(server: FastMCP) -> AsyncIterator[dict[str, object]]:
        await inline_schema_refs(server)
        await skip_listing_for_header_checks(server)
        await access.start()
        try:
            yield {}
        finally:
            await access.stop()  # flushes the audit trail, even when cancelled
            await repository.aclose()

    mcp = FastMCP(
        "ticket-server",
        instructions=INSTRUCTIONS,
        version=__version__,
        mask_error_details=True,
        strict_input_validation=True,
        # The tools' $refs are inlined once at start (inline_schema_refs): FastMCP's
        # DereferenceRefsMiddleware would only be one more layer on every request.
        dereference_schemas=False,
        lifespan=lifespan,
        middleware=[
            *([StartupGate(ready)] if ready is not None else []),
            *access.outer_middleware(), DeprecationMiddleware(retiring, clock), ArgumentErrorMiddleware(),
        ],
    )
    v1.register(mcp, repository, retiring)
    v2.register(mcp, repository, CursorCodec(settings.cursor_key))
    manifest.register(mcp, retiring, clock)
    full_read.register(mcp, repository, CursorCodec(settings.cursor_key))
    resources.register(mcp, repository, CursorCodec(settings.cursor_key))
    prompts.register(mcp, repository)
    completions.register(mcp, repository, scope.register(mcp, access.resolve))
    capabilities.register(mcp)
    return mcp


async def inline_schema_refs(mcp: FastMCP) -> None:
    """Inline each tool's ``$ref``s once, before the first request, with FastMCP's own
    function (what its DereferenceRefsMiddleware, switched off, would do again on every
    tools/list and pass through on every other request). Listed schemas are unchanged.
    The server's tools are fixed once it is built; it has no resource templates."""
    import json

    from fastmcp.utilities.json_schema import dereference_refs

    for tool in await mcp.local_provider.list_tools():
        for field in ("parameters", "output_schema"):
            schema = getattr(tool, field)
            if schema is not None and ("$defs" in schema or '"$ref"' in json.dumps(schema)):
                setattr(tool, field, dereference_refs(schema))


async def skip_listing_for_header_checks(mcp: FastMCP) -> None:
    """Spare every 2026-07-28 HTTP tools/call an internal tools/list.

    Before a tools/call the MCP SDK checks its ``Mcp-Param-*`` headers against the
    ``x-mcp-header`` declarations in the tool's input schema, which it finds by running
    the server's tools/list handler, through every middleware (caller, scopes,
    retirement), unless the server sets the SDK's ``get_tool_input_schema`` lookup.
    None of our tools declares a header, so the check has nothing to compare whatever
    the listing says: the lookup answers "nothing to validate" (None) for every name.
    The tools are fixed once the server is built; should one ever declare a header,
    the SDK's caller-scoped listing stays in place (an unscoped lookup could tell a
    caller about a tool it may not see).
    """
    from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

    for tool in await mcp.local_provider.list_tools():
        if find_invalid_x_mcp_header(tool.parameters) is None and x_mcp_header_map(tool.parameters):
            return
    mcp._mcp_server.get_tool_input_schema = lambda name: None


def serve_stdio(settings: Settings, checks: StartupChecks, fail: Callable[[str], None]) -> None:
    """Serve over stdio until stdin ends or SIGTERM arrives; either way the server's
    lifespan ends normally, so the audit trail is flushed.

    ``checks`` (started already, see ``ticket_server.checks``) must pass before any
    tools/list or tools/call is answered; their lookup of the stdio caller fills the
    callers cache, so the first tools/list needs no query. A failed check is given to
    ``fail`` (one line) and ends the process with exit status 2, even when stdin has
    ended before the verdict."""
    import logging
    import os
    import signal
    import sys

    from ticket_server.transports.stdio import run_stdio

    log = logging.getLogger("ticket_server")
    access = AccessControl(settings)
    passed: asyncio.Future[None] | None = None

    async def terminate(status: int = 0) -> None:
        # FastMCP's stdin reader is a thread that cannot be cancelled: waiting for it
        # would wait for the next input line. Flush the audit trail, then leave.
        await access.stop()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    async def accept() -> None:
        try:
            verdict = await checks.verdict()
        except CheckFailed as exc:
            fail(str(exc))
            await terminate(2)
            raise  # not reached
        access.store.cache.keep(verdict.lookups, checks.generation)
        log.info("serving MCP over stdio", extra={"version": __version__})
        log.info("stdio caller", extra={"caller": verdict.caller})

    async def ready() -> None:
        assert passed is not None
        await asyncio.shield(passed)

    mcp = build_server(settings, access=access, ready=ready)

    async def main() -> None:
        nonlocal passed
        passed = asyncio.ensure_future(accept())
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(terminate()))
        await run_stdio(mcp)  # answers malformed frames (parse error, invalid request)
        # End of input: the lifespan has ended and flushed the audit trail. The exit
        # status still reports a failed check. Then leave rather than let asyncio.run
        # wait for worker threads: a query cancelled inside aiosqlite's thread can leave
        # one that never ends (SQLAlchemy 2.1, aiosqlite 0.22).
        await passed
        await terminate()

    asyncio.run(main())
