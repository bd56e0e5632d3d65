"""The README's client configs (Claude Desktop, VS Code, Cursor) are real: each is
parsed in its client's format and used to spawn the server, which must answer."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.transports.conftest import server_env

README = Path(__file__).resolve().parents[2] / "README.md"
PLACEHOLDER = "/absolute/path/to/ticket-server/.venv/bin/ticket-server"
INSTALLED = Path(sys.executable).parent / "ticket-server"  # the venv's console script


def config(name: str) -> dict:
    """The JSON block that follows `<!-- client-config: NAME -->` in the README."""
    match = re.search(
        rf"<!-- client-config: {re.escape(name)} -->\s*```json\n(.*?)```", README.read_text(), re.S
    )
    assert match, f"no `client-config: {name}` snippet in README.md"
    return json.loads(match.group(1))


def entry(name: str) -> dict:
    document = config(name)
    if name == "vscode":  # .vscode/mcp.json: `servers`, each with a `type`
        assert set(document) == {"servers"}
        server = document["servers"]["tickets"]
        assert server["type"] == "stdio"
    else:  # Claude Desktop and Cursor: `mcpServers`
        assert set(document) == {"mcpServers"}
        server = document["mcpServers"]["tickets"]
        assert "type" not in server
    assert server["command"] == PLACEHOLDER
    return server


@pytest.mark.parametrize("client_name", ["claude-desktop", "vscode", "cursor"])
async def test_readme_config_spawns_the_server(client_name: str, db_path: Path) -> None:
    server = entry(client_name)
    assert INSTALLED.exists(), INSTALLED
    env = server_env(db_path)  # the test database; the snippet's own env on top
    env.update(server.get("env", {}))
    params = StdioServerParameters(command=str(INSTALLED), args=server["args"], env=env)
    async with Client(params, mode="auto", read_timeout_seconds=30) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "get_ticket_status_v2" in names
        result = await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert result.is_error is False
        assert result.structured_content["id"] == "SUP-4412"
