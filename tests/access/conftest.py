"""Callers in the test database, and in-memory servers acting as one of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastmcp import FastMCP

from tests.helpers import create_caller, scalar
from tests.transports.conftest import http_server  # noqa: F401  (a real HTTP server fixture)
from ticket_server.access.callers import open_store
from ticket_server.admin.reports import query
from ticket_server.server import build_server
from ticket_server.settings import Settings


@pytest.fixture
async def add_caller(settings: Settings):
    """add_caller(name, scopes=("tickets:read",), queues=None, tool_rate_limit=None) -> token"""

    async def add(name: str, scopes: tuple[str, ...] = ("tickets:read",), **options) -> str:
        return await create_caller(settings.database_url, name, scopes, **options)

    return add


@pytest.fixture
def server_as(settings: Settings):
    """server_as(**settings) -> a server whose stdio/in-memory caller the settings name."""

    def build(**overrides) -> FastMCP:
        return build_server(settings.model_copy(update=overrides))

    return build


async def audit_rows(settings: Settings, **filters):
    store = open_store(settings)
    try:
        return await query(store, **filters)
    finally:
        await store.aclose()


async def revoke(settings: Settings, name: str) -> None:
    store = open_store(settings)
    try:
        await store.revoke(name)
    finally:
        await store.aclose()


def support_and_billing_ids(database: Path | str) -> tuple[str, str]:
    """The oldest ticket of the support queue and of the billing queue."""
    return tuple(
        scalar(database, f"SELECT id FROM tickets WHERE queue = '{queue}' ORDER BY pk LIMIT 1")
        for queue in ("support", "billing")
    )  # type: ignore[return-value]


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_call(http, url: str, token: str, request_id: int, params: dict):  # -> httpx.Response
    """One 2026-07-28 tools/call POST (``http``: an httpx client or the httpx module),
    built by hand so that malformed params can be sent too."""
    name = params.get("name")
    return http.post(
        url,
        timeout=30,
        json={
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {**params, "_meta": MODERN_META},
        },
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": name if isinstance(name, str) else "x",
        },
    )
