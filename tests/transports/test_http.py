"""The real HTTP server on a loopback port, driven by the official `mcp` SDK client."""

from __future__ import annotations

import json

import httpx2 as httpx
import pytest
from mcp import Client

from tests.helpers import assert_no_leak, text_of


@pytest.mark.parametrize(
    ("mode", "revision"),
    [("legacy", "2025-11-25"), ("auto", "2026-07-28"), ("2026-07-28", "2026-07-28")],
)
async def test_sdk_client_over_http(http_server, mode: str, revision: str) -> None:
    async with Client(http_server.transport(), mode=mode) as client:
        assert client.protocol_version == revision
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"get_ticket_status", "search_tickets"} <= names
        result = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert result.is_error is False
        assert result.structured_content == {
            "id": "SUP-4412",
            "status": "waiting_on_customer",
            "owner": "r.mehta",
            "updated": "2026-07-14",
        }
        missing = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-0000000"})
        assert missing.is_error is True and "SUP-0000000" in text_of(missing)
        assert_no_leak(text_of(missing))
        found = await client.call_tool("search_tickets", {"query": "invoice", "limit": 3})
        assert len(found.structured_content["result"]) == 3


def test_healthz_checks_the_database(http_server) -> None:
    response = httpx.get(f"{http_server.base}/healthz", timeout=5)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def test_foreign_origin_is_refused(http_server) -> None:
    """DNS-rebinding protection: a browser page from another origin gets 403."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    response = httpx.post(
        http_server.url,
        json=body,
        timeout=5,
        headers={"Origin": "http://evil.example", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 403


def test_logs_are_json_on_stderr(http_server) -> None:
    httpx.get(f"{http_server.base}/healthz", timeout=5)
    lines = [line for line in http_server.logs().splitlines() if line.strip()]
    assert lines
    for line in lines:
        json.loads(line)
    assert any(f"http://127.0.0.1:{http_server.port}/mcp" in line for line in lines)
