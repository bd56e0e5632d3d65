"""Protocol cases of issue 32 answered in the call pipeline, the same on every
transport: list cursors this server never issued (C28) and whole-number floats for
integer arguments (C27). In memory, in both revisions and on both engines."""

from __future__ import annotations

import pytest
from fastmcp import Client
from mcp.shared.exceptions import MCPError

from tests.helpers import text_of

LISTS = ("list_tools_mcp", "list_prompts_mcp", "list_resources_mcp", "list_resource_templates_mcp")


@pytest.mark.parametrize("method", LISTS)
async def test_a_bogus_list_cursor_is_invalid_params(client: Client, method: str) -> None:
    """C28: tools/list, prompts/list, resources/list and resources/templates/list with
    `cursor` = `bogus` are a JSON-RPC error -32602, never the first page; the same
    request without a cursor (or with an empty one) is answered whole."""
    with pytest.raises(MCPError) as refused:
        await getattr(client, method)(cursor="bogus")
    assert refused.value.error.code == -32602
    assert "cursor" in refused.value.error.message
    assert "bogus" not in refused.value.error.message
    whole = await getattr(client, method)()
    assert whole.next_cursor is None
    assert await getattr(client, method)(cursor="") == whole


async def test_a_whole_float_is_an_integer(client: Client) -> None:
    """C27: `search_tickets_v2` with `limit` 3.0 (JSON Schema's `integer` admits it) is
    served as limit 3; 3.5 is `isError` naming the bound; so is 1e300, whole but far
    past any integer a tool takes. `get_ticket`'s comment limit takes 2.0 the same way."""
    served = await client.call_tool("search_tickets_v2", {"query": "invoice", "limit": 3.0})
    assert served.is_error is False
    assert len(served.structured_content["tickets"]) == 3
    refused = await client.call_tool(
        "search_tickets_v2", {"query": "invoice", "limit": 3.5}, raise_on_error=False
    )
    assert refused.is_error is True
    assert "'limit' must be an integer from 1 to 50" in text_of(refused)
    full = await client.call_tool("get_ticket", {"ticket_id": "SUP-4412", "limit": 2.0})
    assert full.is_error is False
    assert full.structured_content["conversation"]["returned"] <= 2
    huge = await client.call_tool(
        "search_tickets_v2", {"query": "invoice", "limit": 1e300}, raise_on_error=False
    )
    assert huge.is_error is True and "from 1 to 50" in text_of(huge)
