"""Issue 16, item 9: tickets://manifest lists only the tools the reading caller may call."""

from __future__ import annotations

import json

from fastmcp import Client

from ticket_server.tools.manifest import URI


async def _manifest_tools(client: Client) -> set[str]:
    contents = await client.read_resource(URI)
    return {t["name"] for t in json.loads(contents[0].text)["tools"]}


async def test_a_caller_without_a_tool_scope_sees_no_tool_in_the_manifest(
    server_as, add_caller, mode: str
) -> None:
    await add_caller("outsider", scopes=("other:read",))
    async with Client(server_as(stdio_caller="outsider"), mode=mode) as client:
        assert await _manifest_tools(client) == set()
    async with Client(server_as(), mode=mode) as client:  # the built-in local caller: tickets:read
        assert await _manifest_tools(client) == {
            "get_ticket_status",
            "search_tickets",
            "get_ticket_status_v2",
            "search_tickets_v2",
            "get_ticket",
            "get_customer",
            "get_attachment",
            "count_tickets",
            "find_similar_tickets",
        }
