"""mcp-remote (npm, pinned in .ci/frameworks/mcp-remote): the stdio-to-HTTP bridge desktop
apps launch, configured exactly as the README's snippet (`--header` with the bearer
token from `env`), in front of the real HTTP server; an MCP client on its stdio lists
the tools and makes every call of the plan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from tests.frameworks.conftest import (
    PINS,
    README_URL,
    call_plan,
    check_calls,
    check_schemas,
    install,
    listed_tools,
    readme_snippet,
)
from tests.transports.conftest import HttpServer

# A cold run installs the pinned environment first (about a minute each on CI).
pytestmark = [pytest.mark.sqlite_only, pytest.mark.timeout(900)]


def node() -> str:
    found = shutil.which("node")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("node is needed for mcp-remote, and CI is set")
        pytest.skip("node not found (set CI to make this fail)")
    return found


async def test_mcp_remote_bridge_with_a_bearer_header(
    http_server: HttpServer, settings, tmp_path: Path
) -> None:
    """C22/C23: tools listed and called through mcp-remote over Streamable HTTP; an
    unknown id comes back as isError with its message."""
    env = install("mcp-remote")
    proxy = env / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
    pinned = json.loads((PINS / "mcp-remote" / "package.json").read_text())["dependencies"][
        "mcp-remote"
    ]
    tools = await listed_tools(settings)
    plan = call_plan(tools)
    # The README's desktop-app config, with the pinned bridge in place of `npx -y mcp-remote@...`.
    language, code = readme_snippet("mcp-remote")
    entry = json.loads(code)["mcpServers"]["tickets"]
    assert (
        language == "json"
        and entry["command"] == "npx"
        and entry["args"][:2] == ["-y", f"mcp-remote@{pinned}"]
    )
    args = [a.replace(README_URL, http_server.url) for a in entry["args"][2:]]
    env = {k: v.replace("<token>", http_server.token or "") for k, v in entry["env"].items()}
    bridge = StdioTransport(
        command=node(),
        args=[str(proxy), *args],
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            **env,
        },  # its ~/.mcp-auth in tmp
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
    assert {name: t["schema"] for name, t in out["tools"].items()} == {
        t.name: t.input_schema for t in tools
    }

    # C23: without --header the bridge tries OAuth discovery, then registration at
    # POST /register; a plain 404 there makes it stop at once with that reason.
    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        }
    )
    done = subprocess.run(
        [node(), str(proxy), http_server.url, "--transport", "http-only"],
        input=initialize + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "Registration rejected (HTTP 404)" in done.stderr, done.stderr[-2000:]
