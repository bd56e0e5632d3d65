"""Issue 32, item 1 on the 2026-07-28 revision: a request has no session to send
``notifications/cancelled`` into, so a client that hangs up while its call runs must
have that call cancelled by the gate itself: its task ends (the server's task count goes
back to where it was), and its audit record says `cancelled`, before the database it
waited on is free again."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import httpx2 as httpx

from tests.transports.conftest import (
    WAITING,
    add_caller,
    audit_records,
    database_locked,
    start_http_server,
    stop,
    wait_for_log,
    wait_until_waiting,
)
from tests.transports.test_http_ids import _figures

REVISION = "2026-07-28"


def _request(port: int, token: str, request_id: int, query: str) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {
                "name": "search_tickets_v2",
                "arguments": {"query": query},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": REVISION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
                },
            },
        }
    ).encode()
    head = {
        "Host": f"127.0.0.1:{port}",
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": REVISION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "search_tickets_v2",
        "Content-Length": str(len(body)),
    }
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    return f"POST /mcp HTTP/1.1\r\n{lines}\r\n".encode() + body


async def test_a_2026_07_28_call_whose_client_hangs_up_is_cancelled(
    database_url: str, tmp_path: Path
) -> None:
    token = add_caller(database_url, "gone")
    server = start_http_server(database_url, tmp_path, **WAITING)
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                sock.sendall(_request(server.port, token, 1, "warm"))  # caller cached, warm
                assert b" 200 " in sock.recv(65536).split(b"\r\n", 1)[0] + b" "
            tasks_before, _ = await _figures(http, server)
            with database_locked(database_url):
                with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                    sock.sendall(_request(server.port, token, 2, "refund"))
                    await asyncio.to_thread(
                        wait_until_waiting, database_url, server.logs, "search_tickets_v2", 1, 1
                    )
                # The connection is closed while the call waits on the lock.
                await asyncio.to_thread(
                    wait_for_log,
                    server.logs,
                    lambda r: r.get("audit", {}).get("outcome") == "cancelled",
                )
                deadline = time.monotonic() + 10
                tasks_after, _ = await _figures(http, server)
                while tasks_after > tasks_before and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                    tasks_after, _ = await _figures(http, server)
                assert tasks_after <= tasks_before, (tasks_before, tasks_after)
    finally:
        stop(server.process)
    searches = [r for r in audit_records(server.logs()) if r["tool"] == "search_tickets_v2"]
    assert [r["outcome"] for r in searches] == ["ok", "cancelled"], searches
    assert searches[1]["result_bytes"] == 0
