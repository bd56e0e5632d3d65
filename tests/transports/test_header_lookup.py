"""The 2026-07-28 HTTP path checks a tools/call's Mcp-Param-* headers against the
tool's x-mcp-header declarations; without a lookup the SDK finds the schema by
running the whole tools/list (every middleware) before every call."""

from __future__ import annotations

from typing import Annotated

from fastmcp import Client, FastMCP
from pydantic import Field

from ticket_server.compat import skip_listing_for_header_checks


async def test_no_tool_declares_a_header_so_no_listing_per_call(server: FastMCP) -> None:
    async with Client(server) as client:
        tools = await client.list_tools()
        assert not any("x-mcp-header" in str(t.inputSchema) for t in tools)
        lookup = server._mcp_server.get_tool_input_schema
        assert lookup is not None
        assert all(lookup(t.name) is None for t in tools)


async def test_a_declared_header_keeps_the_scoped_listing() -> None:
    mcp = FastMCP("headers")

    @mcp.tool
    def route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        return region

    await skip_listing_for_header_checks(mcp)
    assert mcp._mcp_server.get_tool_input_schema is None
