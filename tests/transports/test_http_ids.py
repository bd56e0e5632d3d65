"""Request ids in a legacy HTTP session (issue 32, C31): an id in flight is refused at
once; a client that disconnects while its call runs has that call cancelled; and
250 pairs of concurrent duplicate-id requests leave the server's asyncio tasks and
resident memory where they were (both read from its /metrics, loopback)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from pathlib import Path

import httpx2 as httpx

from tests.transports.conftest import (
    WAITING,
    HttpServer,
    add_caller,
    audit_records,
    database_locked,
    start_http_server,
    stop,
    wait_for_log,
    wait_until_waiting,
)
from tests.transports.test_stdio import INIT, INITIALIZED


def _call(request_id: int | str, name: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def _session(http: httpx.AsyncClient, server: HttpServer, token: str) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    init = await http.post(server.url, json=INIT, headers=headers)
    assert init.status_code == 200, init.text
    headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
    assert (await http.post(server.url, json=INITIALIZED, headers=headers)).status_code == 202
    return headers


def _gauge(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


async def _figures(http: httpx.AsyncClient, server: HttpServer) -> tuple[float, float]:
    """(asyncio tasks alive, resident memory in MB) of the server process."""
    text = (await http.get(f"{server.base}/metrics")).text
    return _gauge(text, "ticket_server_asyncio_tasks"), _gauge(
        text, "process_resident_memory_bytes"
    ) / 2**20


async def test_c31_an_id_in_flight_is_refused_and_a_gone_client_cancelled(
    database_url: str, tmp_path: Path
) -> None:
    """C31: while call 10 waits on a locked database, a tools/call and a ping with id 10
    (and "10") in the same session are refused at once (400, -32600, naming the id); a
    second client's call 20, whose connection is closed while it waits, is cancelled
    (its audit record says `cancelled` before the lock goes); once the lock goes call
    10 is answered with its own result, and id 10 may be used again."""
    token = add_caller(database_url, "ids")
    server = start_http_server(database_url, tmp_path, **WAITING)
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            headers = await _session(http, server, token)
            warm = await http.post(
                server.url, json=_call(1, "search_tickets_v2", {}), headers=headers
            )
            assert warm.status_code == 200
            with database_locked(database_url):
                first = asyncio.create_task(
                    http.post(
                        server.url,
                        json=_call(10, "search_tickets_v2", {"query": "invoice"}),
                        headers=headers,
                    )
                )
                await asyncio.to_thread(
                    wait_until_waiting, database_url, server.logs, "search_tickets_v2", 1, 1
                )
                for duplicate in (
                    _call(10, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}),
                    {"jsonrpc": "2.0", "id": 10, "method": "ping"},
                    {"jsonrpc": "2.0", "id": "10", "method": "ping"},
                ):
                    refused = await http.post(server.url, json=duplicate, headers=headers)
                    assert refused.status_code == 400, refused.text
                    error = refused.json()
                    assert error["id"] == duplicate["id"]
                    assert error["error"]["code"] == -32600
                    assert "already in use" in error["error"]["message"]
                assert not first.done(), "call 10 still waits on the database"

                # A client that hangs up mid-call: its call is cancelled at once.
                gone_headers = await _session(http, server, token)
                body = json.dumps(_call(20, "search_tickets_v2", {"query": "refund"})).encode()
                head = "".join(f"{k}: {v}\r\n" for k, v in gone_headers.items())
                request = (
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{head}"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode() + body
                with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                    sock.sendall(request)
                    await asyncio.to_thread(
                        wait_until_waiting, database_url, server.logs, "search_tickets_v2", 2, 1
                    )
                await asyncio.to_thread(
                    wait_for_log,
                    server.logs,
                    lambda r: r.get("audit", {}).get("outcome") == "cancelled",
                )
                assert not first.done()
            answered = await asyncio.wait_for(first, 60)
            assert answered.status_code == 200
            assert answered.json()["id"] == 10
            assert "tickets" in answered.json()["result"]["structuredContent"]
            again = await http.post(
                server.url,
                json=_call(10, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}),
                headers=headers,
            )
            assert again.json()["result"]["structuredContent"]["id"] == "SUP-4412"
    finally:
        stop(server.process)
    searches = [r for r in audit_records(server.logs()) if r["tool"] == "search_tickets_v2"]
    assert sorted(r["outcome"] for r in searches) == ["cancelled", "ok", "ok"], searches


async def test_c31_250_duplicate_pairs_leave_tasks_and_memory_flat(
    db_path: Path, tmp_path: Path
) -> None:
    """C31: 250 pairs of concurrent requests sharing an id (tools/call, and ping) in one
    legacy session, within the caller's default limits' shape: every request gets an
    answer (its result, or -32600 for the second of a pair whose first is in flight),
    none twice; afterwards the server holds as many asyncio tasks as before (+5) and
    its resident memory grew by under 8 MB (before the fix: 247 hung tasks, +20 MB)."""
    token = add_caller(db_path, "pairs", http_rate_limit="100000/minute")
    server = start_http_server(db_path, tmp_path)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await _session(http, server, token)
            calls = [_call(n, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}) for n in range(20)]
            for call in calls:  # warm: every code path a pair takes has run once
                await http.post(server.url, json=call, headers=headers)
            tasks_before, rss_before = await _figures(http, server)
            refused = 0
            for n in range(250):
                pair = (
                    _call(1000 + n, "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
                    if n % 2
                    else {"jsonrpc": "2.0", "id": 1000 + n, "method": "ping"}
                )
                answers = await asyncio.wait_for(
                    asyncio.gather(
                        *(http.post(server.url, json=pair, headers=headers) for _ in range(2))
                    ),
                    30,
                )
                for answer in answers:
                    assert answer.json()["id"] == 1000 + n
                    if answer.status_code == 400:
                        assert answer.json()["error"]["code"] == -32600
                        refused += 1
                    else:
                        assert answer.status_code == 200 and "result" in answer.json()
            tasks_after, rss_after = await _figures(http, server)
    finally:
        stop(server.process)
    print(
        f"C31: {refused} of 250 seconds refused; tasks {tasks_before:g} -> {tasks_after:g}; "
        f"RSS {rss_before:.1f} -> {rss_after:.1f} MB"
    )
    assert tasks_after <= tasks_before + 5
    assert rss_after - rss_before < 8
