"""MCP Apps over the real transports (issue 38): a spawned `ticket-server serve` over stdio
in the legacy revision (the extension declared at initialize) and over Streamable HTTP
in 2026-07-28 (declared in each request's `_meta`) names the card only to the SDK client
that declared the extension, and reads it as an MCP Apps view."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from tests.tools.apps.browser import apps_extension
from tests.tools.test_apps import KEYS, ROOT
from tests.transports.conftest import HttpServer, http_server  # noqa: F401  (fixture)
from tests.transports.test_stdio import stdio_params
from ticket_server.admin import contract
from ticket_server.tools.apps import APP_META, CARD_URI


async def _sees_the_views(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert (tools["get_ticket"].meta or {}).get("ui") == {"resourceUri": CARD_URI}
    result = await client.call_tool("get_ticket", {"ticket_id": "SUP-4412"})
    assert (result.meta or {})[APP_META]["actions"] == []  # a read-only caller
    (content,) = (await client.read_resource(CARD_URI)).contents
    assert content.mime_type == "text/html;profile=mcp-app"


async def _sees_the_published_tools(client: Client) -> None:
    published = {t["name"]: t for t in contract.read_contract(ROOT / "tool-contract.json")["tools"]}
    for tool in (await client.list_tools()).tools:
        dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert {k: v for k, v in dumped.items() if k in KEYS} == published[tool.name]
        assert not (tool.meta or {}).get("ui")
    result = await client.call_tool("get_ticket", {"ticket_id": "SUP-4412"})
    assert APP_META not in (result.meta or {})


async def test_stdio_legacy_names_the_views_to_the_client_that_declared_them(
    db_path: Path,
) -> None:
    async with Client(stdio_params(db_path), mode="legacy", extensions=[apps_extension()]) as c:
        await _sees_the_views(c)
    async with Client(stdio_params(db_path), mode="legacy") as client:
        await _sees_the_published_tools(client)


async def test_http_2026_names_the_views_to_the_client_that_declared_them(
    http_server: HttpServer,
) -> None:
    async with Client(
        http_server.transport(), mode="2026-07-28", extensions=[apps_extension()]
    ) as client:
        await _sees_the_views(client)
    async with Client(http_server.transport(), mode="2026-07-28") as client:
        await _sees_the_published_tools(client)
