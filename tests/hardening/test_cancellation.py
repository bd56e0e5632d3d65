"""Cancellations and disconnects (issue 7): a `notifications/cancelled` for a call that
waits on the database (held by a lock) over raw stdio; an HTTP client that goes away
mid-call. Nothing is timed: the lock decides the order, and each step waits for the
call to be seen waiting (pg_stat_activity on PostgreSQL, the server's handler log record
on SQLite: `wait_until_waiting`). Both engines: SQLite's reads run in worker threads that
a cancellation must interrupt, PostgreSQL's are cancelled in the driver."""

from __future__ import annotations

import asyncio
import json
import signal
import socket

from mcp import Client

from tests.transports.conftest import (
    WAITING,
    add_caller,
    database_locked,
    start_http_server,
    stop,
    wait_until_waiting,
)
from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio, assert_all_jsonrpc


def _call(request_id: int, name: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def _cancel(request_id: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "the user gave up"},
    }


def _cancel_a_waiting_call(raw: RawStdio, database_url: str) -> None:
    """Call 10 waits on a lock and, once seen waiting, is cancelled; then the lock goes;
    then more requests, cancels for an answered id and for an unknown one."""
    raw.send(INIT)
    raw.read_until_id(1)
    raw.send(INITIALIZED)
    raw.send(_call(2, "get_ticket_status", {"ticket_id": "SUP-4412"}))  # warm
    assert raw.read_until_id(2)["result"]["isError"] is False

    with database_locked(database_url):
        raw.send(_call(10, "search_tickets_v2", {"query": "invoice"}))  # waits on the lock
        wait_until_waiting(database_url, raw.stderr, "search_tickets_v2", 1)
        raw.send(_cancel(10))
        raw.send({"jsonrpc": "2.0", "id": 11, "method": "tools/list"})  # needs no database
        assert "result" in raw.read_until_id(11)
    # The database answers again: an uncancelled call 10 would now be answered.
    raw.send({"jsonrpc": "2.0", "id": 12, "method": "tools/list"})
    assert "result" in raw.read_until_id(12)

    raw.send(_call(13, "get_ticket_status", {"ticket_id": "SUP-4412"}))
    assert raw.read_until_id(13)["result"]["isError"] is False
    raw.send(_cancel(13))  # already answered: ignored
    raw.send(_cancel(999))  # never sent: ignored
    raw.send(_call(14, "search_tickets_v2", {"query": "invoice"}))
    answer = raw.read_until_id(14)["result"]
    assert answer["isError"] is False and answer["structuredContent"]["tickets"]
    assert raw.process.poll() is None, "still running"


def test_stdio_cancelled_call_gets_no_reply_and_the_next_is_answered(database_url: str) -> None:
    """A call waiting on a locked database is cancelled: no reply is ever sent for its id,
    the next requests are answered, the process stays up; a cancel for an id that has
    already been answered is ignored. (Stopped by SIGTERM; the end-of-input exit is the next test.)"""
    raw = RawStdio(database_url, **WAITING)
    try:
        _cancel_a_waiting_call(raw, database_url)
        raw.process.send_signal(signal.SIGTERM)
        assert raw.process.wait(timeout=30) == 0, raw.stderr()
    finally:
        raw.close()
        stop(raw.process)
    assert_all_jsonrpc(raw.lines)
    ids = [json.loads(line).get("id") for line in raw.lines if line.strip()]
    assert 10 not in ids, "no reply for a cancelled request"
    assert ids.count(13) == 1 and ids.count(14) == 1


def test_stdio_exits_at_end_of_input_after_a_cancelled_call(database_url: str) -> None:
    """After a cancelled call, the end of stdin still stops the server (exit 0)."""
    raw = RawStdio(database_url, **WAITING)
    try:
        _cancel_a_waiting_call(raw, database_url)
        raw.close()  # end of stdin: the server stops and flushes what it has
        assert raw.process.returncode == 0, raw.stderr()
    finally:
        stop(raw.process)


async def test_http_client_disconnecting_mid_call_leaves_others_unaffected(
    database_url: str, tmp_path
) -> None:
    """A client sends a tools/call that waits on a locked database and closes its
    connection before the answer; another client's call, waiting at the same time, and
    every later call are answered; the server stays up and stops cleanly."""
    import httpx2 as httpx

    gone = add_caller(database_url, "goes-away")
    stays = add_caller(database_url, "stays")
    server = start_http_server(database_url, tmp_path, **WAITING)
    headers = {
        "Authorization": f"Bearer {gone}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            init = await http.post(server.url, json=INIT, headers=headers)
            assert init.status_code == 200
            if init.headers.get("mcp-session-id"):
                headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
            await http.post(server.url, json=INITIALIZED, headers=headers)
        async with Client(server.transport(stays), mode="2026-07-28") as client:
            await client.call_tool("search_tickets_v2", {"query": "refund"})  # warm
            with database_locked(database_url):
                other = asyncio.create_task(
                    client.call_tool("search_tickets_v2", {"query": "invoice"})
                )
                await asyncio.to_thread(
                    wait_until_waiting, database_url, server.logs, "search_tickets_v2", 1, 1
                )

                body = json.dumps(_call(7, "search_tickets_v2", {"query": "password"})).encode()
                head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                request = (
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{head}"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode() + body
                with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                    sock.sendall(request)
                    # Both calls wait on the database; then this client hangs up.
                    await asyncio.to_thread(
                        wait_until_waiting, database_url, server.logs, "search_tickets_v2", 2, 1
                    )
                assert not other.done(), "the other call still waits on the database"
            result = await asyncio.wait_for(other, 60)
            assert result.is_error is False and result.structured_content["tickets"]
            for query in ("invoice", "refund", "password"):
                again = await client.call_tool("search_tickets_v2", {"query": query})
                assert again.is_error is False
        assert server.process.poll() is None, "still serving"
    finally:
        stop(server.process)
    assert server.process.returncode == 0, server.logs()
    assert gone not in server.logs() and stays not in server.logs()
