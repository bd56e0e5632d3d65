"""The `tickets://manifest` resource: what this server publishes and when names retire."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastmcp import FastMCP
from fastmcp.apps.config import is_model_visible
from fastmcp.tools import Tool
from pydantic import BaseModel

from ticket_server import __version__
from ticket_server.access.callers import Caller
from ticket_server.tools.versions import ToolVersions

URI = "tickets://manifest"


class ToolEntry(BaseModel):
    name: str
    status: str  # current | deprecated | retired
    replacement: str | None = None
    sunset: str | None = None


class Manifest(BaseModel):
    server: str
    version: str
    tools: list[ToolEntry]


def register(
    mcp: FastMCP,
    versions: ToolVersions,
    caller: Callable[[], Awaitable[Caller | None]],
    may_use: Callable[[Caller | None, Tool], bool],
) -> None:
    """Add the manifest; it lists only the tools ``caller()`` (the caller of the read) may
    use (``may_use``: its scopes and the deployment's toolsets), app-only ones left out
    (MCP Apps: no model calls them)."""

    @mcp.resource(
        URI,
        name="manifest",
        title="Tool manifest",
        description="Server version and every tool you may call with its status (current, "
        "deprecated or retired), replacement and retirement date, as JSON.",
        mime_type="application/json",
    )
    async def tool_manifest() -> str:
        today = versions.clock()
        entries = []
        reader = await caller()
        tools = [
            t
            for t in await mcp.list_tools(run_middleware=False)
            if reader is not None and may_use(reader, t) and is_model_visible(t)
        ]
        for tool in sorted(tools, key=lambda t: t.name):
            d = versions.get(tool.name)
            if d is None:
                entries.append(ToolEntry(name=tool.name, status="current"))
            else:
                status = "retired" if d.retired(today) else "deprecated"
                entries.append(
                    ToolEntry(
                        name=tool.name,
                        status=status,
                        replacement=d.replacement,
                        sunset=d.sunset.isoformat(),
                    )
                )
        return Manifest(server=mcp.name, version=__version__, tools=entries).model_dump_json(
            indent=2
        )
