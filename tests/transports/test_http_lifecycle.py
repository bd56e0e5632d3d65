"""The HTTP server under concurrency and shutdown: C09, SIGTERM during load."""

from __future__ import annotations

import asyncio
import signal
from datetime import datetime, timedelta

import httpx2 as httpx
import pytest
from mcp import Client

from tests.postgres import server_at, table_locked, wait_for_lock_waiters
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


def _interval(record: dict) -> tuple[datetime, datetime]:
    end = datetime.fromisoformat(record["time"])
    return end - timedelta(milliseconds=record["duration_ms"]), end


async def test_c09_database_work_never_blocks_the_event_loop(database_url: str, tmp_path) -> None:
    """C09: two search_tickets_v2 calls wait on a slow (here: locked) database at the same
    time, and the server still answers a request that needs no database meanwhile (the
    RFC 9728 metadata); both finish once the database answers, and the server's own
    audit records show the two searches ran at once (each started before the other
    ended). Nothing here is timed: the lock decides the order. Both engines: SQLite reads
    run in worker threads (the path that could block the loop), PostgreSQL's are async."""
    token = add_caller(database_url, "tester")
    server = start_http_server(database_url, tmp_path, **WAITING)
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            await client.call_tool(
                "search_tickets_v2", {"query": "refund"}
            )  # warm: caller cached, pool open
            with database_locked(database_url):
                first = asyncio.create_task(
                    client.call_tool("search_tickets_v2", {"query": "invoice"})
                )
                second = asyncio.create_task(
                    client.call_tool("search_tickets_v2", {"query": "password"})
                )
                await asyncio.to_thread(
                    wait_until_waiting, database_url, server.logs, "search_tickets_v2", 2, 1
                )
                async with httpx.AsyncClient(
                    timeout=10
                ) as http:  # answered while both searches wait
                    metadata = await http.get(
                        f"{server.base}/.well-known/oauth-protected-resource/mcp"
                    )
                assert metadata.status_code == 200
                assert not first.done() and not second.done(), (
                    "both searches are still waiting on the database"
                )
            results = await asyncio.wait_for(asyncio.gather(first, second), 60)
            assert all(r.is_error is False and r.structured_content["tickets"] for r in results)
    finally:
        stop(server.process)
    searches = [r for r in audit_records(server.logs()) if r["tool"] == "search_tickets_v2"][1:]
    assert len(searches) == 2 and all(r["outcome"] == "ok" for r in searches), searches
    (start_a, end_a), (start_b, end_b) = (_interval(r) for r in searches)
    assert start_a < end_b and start_b < end_a, f"the two searches did not overlap: {searches}"


@pytest.mark.postgresql_only
async def test_sigterm_during_load_answers_in_flight_calls_flushes_audit_and_exits_0(
    database_url: str, tmp_path
) -> None:
    """SIGTERM while 8 searches are in flight: every one of the 8 is answered (no error,
    tickets), the process exits 0, and the audit trail (its 30 s flush never due: only
    shutdown writes it) holds exactly the 5 earlier calls and the 8 in-flight ones, each
    with its own trace id. PostgreSQL only: the 8 calls are held by a table lock until
    all 8 are seen waiting in pg_stat_activity, and SIGTERM is sent only then, so each
    is in flight for certain (SQLite shows no sign of a waiting reader); the lock goes
    only once uvicorn has logged that it is shutting down."""
    token = add_caller(database_url, "loader")
    server = start_http_server(
        database_url,
        tmp_path,
        TICKET_SERVER_AUDIT_FLUSH_SECONDS="30",
        TICKET_SERVER_DATABASE_TIMEOUT="60",
        TICKET_SERVER_CALLER_CACHE_SECONDS="600",
        TICKET_SERVER_CALLER_SHARE="8",  # all 8 searches in flight at once, not 2 by 2
    )
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            for _ in range(5):
                warm = await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
                assert warm.is_error is False
            with table_locked(database_url):
                calls = [
                    asyncio.create_task(client.call_tool("search_tickets_v2", {"query": "refund"}))
                    for _ in range(8)
                ]
                await asyncio.to_thread(wait_for_lock_waiters, database_url, 8)
                server.process.send_signal(signal.SIGTERM)
                await asyncio.to_thread(
                    wait_for_log,
                    server.logs,
                    lambda r: (
                        r.get("logger", "").startswith("uvicorn")
                        and "Shutting down" in r.get("message", "")
                    ),
                )
                assert not any(c.done() for c in calls), "every search still waits on the lock"
            outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 60)
        for outcome in outcomes:
            assert not isinstance(outcome, BaseException), (
                f"an in-flight call was not answered: {outcome!r}"
            )
            assert outcome.is_error is False and outcome.structured_content["tickets"], outcome
        assert server.process.wait(timeout=30) == 0, server.logs()
    finally:
        if server.process.poll() is None:
            server.process.kill()
    pg, name = server_at(database_url)
    rows = pg.psql(
        "SELECT tool, outcome, count(*), count(DISTINCT trace_id) FROM audit_events "
        "WHERE caller = 'loader' GROUP BY tool, outcome ORDER BY tool",
        name,
    ).split()
    assert rows == ["get_ticket_status_v2|ok|5|5", "search_tickets_v2|ok|8|8"], rows
    assert token not in server.logs()
