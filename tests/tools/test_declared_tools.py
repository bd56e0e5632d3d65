"""Tools are declared once per process (``tools/declare.py``) and given their server's
repository, clock and write policy by dependency injection (``tools/services.py``):
each server serves its own data, and no caller can set what is injected."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastmcp import Client

from tests.access.conftest import add_caller, server_as  # noqa: F401  (fixtures)
from tests.helpers import call_any
from tests.tools.test_writes import state
from ticket_server import db
from ticket_server.server import build_server
from ticket_server.settings import Settings


@pytest.mark.sqlite_only
async def test_two_servers_in_one_process_each_serve_their_own_database(
    settings: Settings, tmp_path: Path
) -> None:
    """The same Tool objects on two servers at once: each call reads its own server's
    database (the sample one, and an empty one without SUP-4412)."""
    empty = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
    await asyncio.to_thread(db.upgrade, empty)
    sample = build_server(settings)
    bare = build_server(settings.model_copy(update={"database_url": empty}))
    async with Client(sample) as a, Client(bare) as b:
        for _ in range(2):  # interleaved
            found = await a.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            assert found.structured_content["id"] == "SUP-4412"
            missing = await b.call_tool(
                "get_ticket_status_v2", {"ticket_id": "SUP-4412"}, raise_on_error=False
            )
            assert missing.is_error, missing.content[0].text
            assert "No ticket with id 'SUP-4412'" in missing.content[0].text


async def test_an_injected_parameter_is_not_an_argument(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """``services`` is absent from every input schema, and a call that sends it is
    refused as an unknown argument, changing nothing."""
    await add_caller("writer", ("tickets:read", "tickets:write"))
    async with Client(server_as(stdio_caller="writer"), mode=mode) as client:
        for tool in await client.list_tools():
            assert "services" not in tool.inputSchema.get("properties", {}), tool.name
        before = await state(settings, "SUP-4412")
        for name, arguments in (
            ("get_ticket_status_v2", {"ticket_id": "SUP-4412"}),
            ("add_internal_note", {"ticket_id": "SUP-4412", "note": "x"}),
        ):
            is_error, text = await call_any(client, name, {**arguments, "services": {"x": 1}})
            assert is_error and "'services' is not an argument of this tool" in text, text
        assert await state(settings, "SUP-4412") == before


@pytest.mark.sqlite_only
async def test_listed_schemas_hold_no_refs(server, mode: str) -> None:
    """Every tool's input and output schema is listed with its ``$ref``s inlined (done
    once where tools are declared; FastMCP's per-request dereferencing is off)."""
    async with Client(server, mode=mode) as client:
        for tool in await client.list_tools():
            for schema in (tool.inputSchema, tool.outputSchema or {}):
                assert "$defs" not in schema and '"$ref"' not in json.dumps(schema), tool.name
