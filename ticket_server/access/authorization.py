"""Authorization, the same on every transport: a tool's required scope is data on the
tool (its ``tags`` of the form ``resource:action``, e.g. ``tickets:read``); a caller
sees and calls only the tools whose every scope it holds. A tool without a scope tag
is nobody's (fail closed). A refused call is answered exactly as an unknown tool is.
Checked on every request: nothing is cached per connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from fastmcp.exceptions import NotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp import types as mt

from ticket_server.access.callers import SCOPE, Caller, RegistryUnavailable
from ticket_server.access.context import CallRecord, current_call

Resolver = Callable[[], Awaitable[tuple[Caller | None, str]]]

UNAVAILABLE = (
    "The ticket database is unavailable right now; nothing was changed. Try again in a few seconds."
)


def shown(name: str) -> str:
    """A tool name as quoted back to the client: repr (escapes control characters and
    lone surrogates), at most 80 characters (a client may send a megabyte of name)."""
    text = repr(name)
    return text if len(text) <= 80 else text[:77] + "..."


def required_scopes(tool: Tool) -> frozenset[str]:
    return frozenset(tag for tag in tool.tags if SCOPE.match(tag))


def may_call(caller: Caller | None, tool: Tool) -> bool:
    needed = required_scopes(tool)
    return caller is not None and bool(needed) and needed <= caller.scopes


class AuthorizationMiddleware(Middleware):
    def __init__(self, resolve: Resolver, list_fallback: Caller | None = None) -> None:
        self.resolve = resolve
        self.fallback = list_fallback
        # A tool found once is kept by name (FastMCP's get_tool runs the providers and
        # transforms again on every call); the scopes are still checked on every call.
        # The server's tools are fixed once it is built; a name not found is looked up again.
        self._tools: dict[str, Tool] = {}

    async def _tool(self, context: MiddlewareContext[mt.CallToolRequestParams], name: str) -> Tool | None:
        tool = self._tools.get(name)
        if tool is None and context.fastmcp_context is not None:
            tool = await context.fastmcp_context.fastmcp.get_tool(name)
            if tool is not None:
                self._tools[name] = tool
        return tool

    async def on_list_tools(
        self,
        context: MiddlewareContext[mt.ListToolsRequest],
        call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        try:
            caller, _ = await self.resolve()
        except RegistryUnavailable as exc:
            if self.fallback is None:
                raise MCPError(code=-32603, message=UNAVAILABLE) from exc
            # No identity configured and the registry unreadable: list what the
            # built-in local caller would see (calls still answer "unavailable").
            caller = self.fallback
        return [tool for tool in tools if may_call(caller, tool)]

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        name = context.message.name
        record = current_call.get()
        if record is None:  # no audit layer outside: keep one record for the layers below
            record = CallRecord(trace_id="", tool=name)
            current_call.set(record)
        try:
            record.caller, record.transport = await self.resolve()
        except RegistryUnavailable as exc:
            record.detail = "callers table unavailable"
            raise ToolError(UNAVAILABLE) from exc
        tool = await self._tool(context, name)
        if tool is None:
            raise NotFoundError(f"Unknown tool: {shown(name)}")
        if not may_call(record.caller, tool):
            record.outcome = "denied"
            record.detail = (
                "no caller" if record.caller is None
                else f"needs {' '.join(sorted(required_scopes(tool))) or 'a scope tag'}"
            )
            raise NotFoundError(f"Unknown tool: {shown(name)}")
        return await call_next(context)
