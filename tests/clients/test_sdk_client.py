"""The official `mcp` SDK `Client`, in each connect mode, over stdio and HTTP: list the
tools, call every tool listed, read every resource listed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2 as httpx
import jsonschema
import pytest
from mcp import Client

from tests.clients.conftest import example_arguments, stdio_params
from tests.helpers import assert_no_leak, text_of
from tests.transports.conftest import add_caller, start_http_server, stop

MODES = [("legacy", "2025-11-25"), ("auto", "2026-07-28"), ("2026-07-28", "2026-07-28")]


@pytest.fixture(params=["stdio", "http", "http-postgresql"])
def target(request: pytest.FixtureRequest, db_path: Path, tmp_path: Path):
    """What `mcp.Client(...)` connects to: stdio parameters, or an HTTP transport with
    a caller's bearer token. stdio and HTTP on the SQLite sample; HTTP once more on the
    PostgreSQL sample, so that every tool and resource is called through a real server
    process on each engine (stdio on PostgreSQL would add nothing HTTP does not)."""
    if request.param == "stdio":
        return stdio_params(db_path)
    if request.param == "http":
        return request.getfixturevalue("http_server").transport()
    url = request.getfixturevalue("postgres_database_url")
    token = add_caller(url, "tester")
    server = start_http_server(url, tmp_path)
    request.addfinalizer(lambda: stop(server.process))
    return server.transport(token)


def published_tool_names() -> set[str]:
    """The read-only tools of the published contract (tool-contract.json): what a caller
    with `tickets:read` on every queue (and no `tickets:write`) must see, no more and no
    fewer."""
    contract = json.loads((Path(__file__).resolve().parents[2] / "tool-contract.json").read_text())
    return {
        tool["name"]
        for tool in contract["tools"]
        if tool.get("annotations", {}).get("readOnlyHint")
    }


async def list_all_tools(client: Client) -> list:
    tools, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def list_all_resources(client: Client) -> list:
    resources, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        resources.extend(page.resources)
        cursor = page.next_cursor
        if not cursor:
            return resources


@pytest.mark.parametrize(("mode", "revision"), MODES)
async def test_every_tool_and_resource(target, mode: str, revision: str) -> None:
    async with Client(target, mode=mode, read_timeout_seconds=30) as client:
        assert client.protocol_version == revision
        if mode != "2026-07-28":  # a pinned version adopts without any handshake: no server info
            assert client.server_info is not None and client.server_info.name == "ticket-server"

        tools = await list_all_tools(client)
        names = [t.name for t in tools]
        assert len(names) == len(set(names)), f"a tool is listed twice: {names}"
        assert set(names) == published_tool_names(), names
        for tool in tools:
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            arguments = example_arguments(tool.input_schema)
            jsonschema.validate(arguments, tool.input_schema)
            result = await client.call_tool(tool.name, arguments)
            text = text_of(result)
            assert result.is_error is False, f"{tool.name}({arguments}) -> {text}"
            assert_no_leak(text)
            if tool.output_schema is not None:
                # A tool with an output schema returns structuredContent that matches it,
                # and the same JSON as text for older clients.
                assert result.structured_content is not None, tool.name
                jsonschema.validate(result.structured_content, tool.output_schema)
                mirrored = json.loads(text)
                if set(result.structured_content) == {"result"} and not isinstance(mirrored, dict):
                    mirrored = {"result": mirrored}
                assert mirrored == result.structured_content, tool.name

        resources = await list_all_resources(client)
        for resource in resources:
            read = await client.read_resource(str(resource.uri))
            assert read.contents, resource.uri
            for content in read.contents:
                assert str(content.uri) == str(resource.uri)
                body = getattr(content, "text", None)
                assert body or getattr(content, "blob", None), resource.uri
                if (
                    body is not None
                    and (content.mime_type or resource.mime_type) == "application/json"
                ):
                    json.loads(body)


@pytest.mark.parametrize(("mode", "revision"), MODES)
async def test_unknown_tool_is_not_a_crash(target, mode: str, revision: str) -> None:
    """A call the server cannot serve answers as an error the client can read, and the
    connection stays usable."""
    async with Client(target, mode=mode, read_timeout_seconds=30) as client:
        try:
            result = await client.call_tool("no_such_tool", {})
        except Exception as exc:  # a JSON-RPC error is also an acceptable answer
            assert "no_such_tool" in str(exc) or "Unknown tool" in str(exc)
        else:
            assert result.is_error is True
            assert "no_such_tool" in text_of(result)
        assert await list_all_tools(client)


async def test_http_without_token_is_refused(http_server) -> None:
    """The same HTTP endpoint the SDK used above refuses a client without a token."""
    response = httpx.post(
        http_server.url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        headers={"Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert response.status_code == 401
