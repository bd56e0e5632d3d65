"""Deprecation policy: dated retirement of tool names, enforced by the server's clock.

MCP has no standard deprecation field, so the machine-readable facts go in ``_meta``
under one namespaced key (MCP spec, "General fields: _meta": prefixed key names are
reserved to their owner): on the tool as listed, and on every result of a call to it.
On and after its retirement date a tool is no longer listed, and a call to it is an
``isError`` result naming the replacement and how the arguments map.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp import types as mt

META_KEY = "dev.ticket-server/deprecation"

Clock = Callable[[], date]


def utc_today() -> date:
    return datetime.now(UTC).date()


@dataclass(frozen=True)
class Deprecation:
    """``tool`` is deprecated in favour of ``replacement`` and retires on ``sunset``;
    ``arguments`` tells a model how to call the replacement instead."""

    tool: str
    replacement: str
    sunset: date
    arguments: str

    def announcement(self) -> str:
        """The first line of the deprecated tool's description."""
        return f"DEPRECATED, retires {self.sunset.isoformat()}: use {self.replacement}."

    def meta(self) -> dict[str, object]:
        return {
            META_KEY: {
                "deprecated": True,
                "replacement": self.replacement,
                "sunset": self.sunset.isoformat(),
            }
        }

    def retired(self, today: date) -> bool:
        return today >= self.sunset

    def retired_message(self) -> str:
        return (
            f"The tool {self.tool} was retired on {self.sunset.isoformat()}. "
            f"Call {self.replacement} instead: {self.arguments}"
        )


class DeprecationMiddleware(Middleware):
    """Hides retired tools, refuses calls to them, and stamps deprecation facts on
    results of deprecated tools. ``clock`` is injectable so tests can move the date."""

    def __init__(self, deprecations: Mapping[str, Deprecation], clock: Clock = utc_today) -> None:
        self._deprecations = dict(deprecations)
        self._clock = clock

    async def on_list_tools(
        self,
        context: MiddlewareContext[mt.ListToolsRequest],
        call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        today = self._clock()
        return [
            t for t in tools
            if (d := self._deprecations.get(t.name)) is None or not d.retired(today)
        ]

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        deprecation = self._deprecations.get(context.message.name)
        if deprecation is None:
            return await call_next(context)
        if deprecation.retired(self._clock()):
            # An isError result (not a JSON-RPC error) so the model reads where to go.
            return ToolResult(
                content=[mt.TextContent(type="text", text=deprecation.retired_message())],
                meta=deprecation.meta(),
                is_error=True,
            )
        result = await call_next(context)
        result.meta = {**(result.meta or {}), **deprecation.meta()}
        return result
