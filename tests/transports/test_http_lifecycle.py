"""The HTTP server under concurrency and shutdown: C09, SIGTERM during load."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import httpx2 as httpx
from mcp import Client

from tests.transports.conftest import add_caller, start_http_server, stop


async def test_c09_database_work_never_blocks_the_event_loop(db_path: Path, tmp_path: Path) -> None:
    """C09: two search_tickets_v2 calls wait on a slow (here: locked) database at the same
    time, and the server still answers a request that needs no database meanwhile (the
    RFC 9728 metadata; every MCP request checks its bearer token in the database); both
    finish once the database answers. Nothing here is timed: the lock decides the order."""
    token = add_caller(db_path, "tester")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_DATABASE_TIMEOUT="60")
    lock = sqlite3.connect(db_path, timeout=1)
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            await client.call_tool("search_tickets_v2", {"query": "refund"})  # warm: caller cached, pool open
            lock.execute("BEGIN EXCLUSIVE")  # readers now wait for the database
            first = asyncio.create_task(client.call_tool("search_tickets_v2", {"query": "invoice"}))
            second = asyncio.create_task(client.call_tool("search_tickets_v2", {"query": "password"}))
            await asyncio.sleep(0.5)
            async with httpx.AsyncClient(timeout=10) as http:  # answered while both searches wait
                metadata = await http.get(f"{server.base}/.well-known/oauth-protected-resource/mcp")
            assert metadata.status_code == 200
            assert not first.done() and not second.done(), "both searches are still waiting on the database"
            lock.rollback()
            results = await asyncio.wait_for(asyncio.gather(first, second), 60)
            assert all(r.is_error is False and r.structured_content["tickets"] for r in results)
    finally:
        lock.close()
        stop(server.process)


async def test_sigterm_during_load_answers_in_flight_calls_flushes_audit_and_exits_0(db_path: Path, tmp_path: Path) -> None:
    token = add_caller(db_path, "loader")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_AUDIT_FLUSH_SECONDS="30")
    answered = 0
    outcomes: list[object] = []
    try:
        try:
            async with Client(server.transport(token), mode="2026-07-28") as client:
                for _ in range(5):
                    await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
                    answered += 1
                calls = [asyncio.create_task(client.call_tool("search_tickets_v2", {"query": "refund"})) for _ in range(8)]
                await asyncio.sleep(0.05)
                server.process.send_signal(signal.SIGTERM)
                outcomes = await asyncio.gather(*calls, return_exceptions=True)
        except* (httpx.HTTPError, ConnectionError):
            pass  # a request sent after the server stopped accepting is refused, never half-done
        answered += sum(1 for o in outcomes if not isinstance(o, BaseException) and o.is_error is False)
        assert server.process.wait(timeout=30) == 0, server.logs()
    finally:
        if server.process.poll() is None:
            server.process.kill()
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT count(*) FROM audit_events WHERE caller = 'loader' AND outcome = 'ok'").fetchone()[0]
    # The audit trail waited for a 30 s flush that never came: only shutdown wrote it.
    assert rows == answered >= 5
    assert token not in server.logs()
