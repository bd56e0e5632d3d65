"""C26: a request whose id is null, over both transports."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx

from tests.transports.conftest import add_caller, start_http_server, stop
from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio

NULL_ID_LIST = {"jsonrpc": "2.0", "id": None, "method": "tools/list"}


def test_c26_null_id_over_stdio(db_path: Path) -> None:
    """C26 (stdio): `{"jsonrpc":"2.0","id":null,"method":"tools/list"}` is an Invalid
    Request (-32600) with id null, not a notification left unanswered; the next valid
    request is answered."""
    raw = RawStdio(db_path)
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        raw.send(NULL_ID_LIST)
        refused = raw.read()
        assert refused == {"jsonrpc": "2.0", "id": None, "error": refused["error"]}
        assert refused["error"]["code"] == -32600
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert raw.read_until_id(2)["result"]["tools"]
    finally:
        raw.close()
        stop(raw.process)


def test_c26_null_id_over_http(db_path: Path, tmp_path: Path) -> None:
    """C26 (HTTP): the same frame gets -32600 with id null; the next request is answered."""
    token = add_caller(db_path, "nullid")
    server = start_http_server(db_path, tmp_path)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    try:
        refused = httpx.post(
            server.url,
            json={**NULL_ID_LIST, "params": {"_meta": meta}},
            headers=headers,
            timeout=30,
        )
        body = refused.json()
        assert body["id"] is None and body["error"]["code"] == -32600, body
        answered = httpx.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}},
            headers=headers,
            timeout=30,
        )
        assert answered.status_code == 200 and answered.json()["result"]["tools"], answered.text
    finally:
        stop(server.process)
