"""The caller's scopes and queues for resources, prompts and completions.

The access room's authorization resolves the caller on tools/call only. Resource reads,
prompts and completions need the same answer: this middleware resolves the caller on
resources/read and prompts/get, records it where ``current_queues()`` finds it, and
hides from listings and reads every component whose scope tag (``tickets:read``) the
caller lacks, answering exactly as for a missing one. A component without a scope tag
(the manifest) stays public. ``completion/complete`` passes no middleware in FastMCP,
so its handler asks ``ReadScope.queues()`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import NotFoundError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp import types as mt
from mcp.shared.exceptions import MCPError

from ticket_server.access.authorization import UNAVAILABLE, Resolver
from ticket_server.access.callers import SCOPE, Caller, RegistryUnavailable
from ticket_server.access.context import CallRecord, current_call

READ_SCOPE = "tickets:read"


def allowed(caller: Caller | None, component: Any) -> bool:
    """Whether ``caller`` holds every scope tag of ``component`` (none: anyone)."""
    needed = {tag for tag in component.tags if SCOPE.match(tag)}
    return not needed or (caller is not None and needed <= caller.scopes)


class ReadScope(Middleware):
    def __init__(self, resolve: Resolver) -> None:
        self.resolve = resolve

    async def caller(self) -> tuple[Caller | None, str]:
        try:
            return await self.resolve()
        except RegistryUnavailable as exc:
            raise MCPError(code=-32603, message=UNAVAILABLE) from exc

    async def queues(self) -> frozenset[str] | None:
        """The queues the caller may read, as ``current_queues()`` says it: None = every
        queue; empty = none (no caller, or no read scope)."""
        caller, _ = await self.caller()
        if caller is None or READ_SCOPE not in caller.scopes:
            return frozenset()
        return caller.queues

    async def _filter(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Sequence[Any]]) -> Sequence[Any]:
        components = await call_next(context)
        caller, _ = await self.caller()
        return [c for c in components if allowed(caller, c)]

    on_list_resources = _filter
    on_list_resource_templates = _filter
    on_list_prompts = _filter

    async def _served(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any], component: Any,
                      missing: Exception) -> Any:
        caller, transport = await self.caller()
        if component is not None and not allowed(caller, component):
            raise missing
        token = current_call.set(CallRecord(trace_id="", tool="", transport=transport, caller=caller))
        try:
            return await call_next(context)
        finally:
            current_call.reset(token)

    async def on_read_resource(self, context: MiddlewareContext[mt.ReadResourceRequestParams],
                               call_next: CallNext[mt.ReadResourceRequestParams, Any]) -> Any:
        uri = str(context.message.uri)
        server = context.fastmcp_context.fastmcp if context.fastmcp_context else None
        component = None
        if server is not None:
            component = await server.get_resource(uri) or await server.get_resource_template(uri)
        return await self._served(context, call_next, component, NotFoundError(f"Unknown resource: {uri!r}"))

    async def on_get_prompt(self, context: MiddlewareContext[mt.GetPromptRequestParams],
                            call_next: CallNext[mt.GetPromptRequestParams, Any]) -> Any:
        name = context.message.name
        server = context.fastmcp_context.fastmcp if context.fastmcp_context else None
        component = await server.get_prompt(name) if server is not None else None
        return await self._served(context, call_next, component, NotFoundError(f"Unknown prompt: {name!r}"))


def register(mcp: FastMCP, resolve: Resolver) -> ReadScope:
    """Add the ``ReadScope`` middleware to ``mcp``; returns it (completions ask it)."""
    scope = ReadScope(resolve)
    mcp.add_middleware(scope)
    return scope
