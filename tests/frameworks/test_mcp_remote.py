"""mcp-remote (npm, pinned in .ci/frameworks/mcp-remote): the stdio-to-HTTP bridge desktop
apps launch, with `--header "Authorization: Bearer ..."`, in front of the real HTTP
server; an MCP client on its stdio lists the tools and makes every call of the plan."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from tests.frameworks.conftest import call_plan, check_calls, check_schemas, install, listed_tools
from tests.transports.conftest import HttpServer

pytestmark = pytest.mark.sqlite_only


def node() -> str:
    found = shutil.which("node")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("node is needed for mcp-remote, and CI is set")
        pytest.skip("node not found (set CI to make this fail)")
    return found


async def test_mcp_remote_bridge_with_a_bearer_header(http_server: HttpServer, settings, tmp_path: Path) -> None:
    """C22/C23: tools listed and called through mcp-remote over Streamable HTTP; an
    unknown id comes back as isError with its message."""
    env = install("mcp-remote")
    proxy = env / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
    tools = await listed_tools(settings)
    plan = call_plan(tools)
    bridge = StdioTransport(
        command=node(),
        args=[str(proxy), http_server.url, "--transport", "http-only",
              "--header", f"Authorization: Bearer {http_server.token}"],
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},  # its ~/.mcp-auth in tmp
        cwd=str(tmp_path),
    )
    out: dict = {"framework": "mcp-remote", "tools": {}, "calls": []}
    async with Client(bridge, timeout=60) as client:
        for tool in await client.list_tools():
            out["tools"][tool.name] = {"schema": tool.input_schema}
        for call in plan:
            result = await client.call_tool(call["tool"], call["arguments"], raise_on_error=False)
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            out["calls"].append({"is_error": result.is_error, "text": text})
    check_schemas(out, tools)
    check_calls(out, plan)
    assert {name: t["schema"] for name, t in out["tools"].items()} == {t.name: t.input_schema for t in tools}
