"""Broken dependencies (issue 7): the rate-limit Redis stopped and started again, under
each `TICKET_SERVER_RATE_LIMIT_FAILURE` policy; the PostgreSQL server stopped and
started again (C05 b). Real processes on loopback ports; nothing here is timed except
the bound that says "no hang"."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import assert_no_leak, text_of
from tests.services import RedisServer, redis_server  # noqa: F401  (fixture)
from tests.transports.conftest import add_caller, start_http_server, stop
from ticket_server.access.ratelimit import META_KEY

pytestmark = pytest.mark.sqlite_only
ARGS = {"ticket_id": "SUP-4412"}


def _log_lines(logs: str, needle: str) -> list[dict]:
    found = []
    for line in logs.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if needle in str(record.get("message", "")):
            found.append(record)
    return found


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_redis_down_then_back_follows_the_failure_policy(
    db_path: Path, tmp_path: Path, redis_server: RedisServer, policy: str
) -> None:
    """Redis (the rate-limit storage) stopped while the HTTP server runs: every call is
    still answered, never a 5xx; `open` lets calls through past the limit with one ERROR
    log line for the outage; `closed` refuses each with an isError asking to retry, the
    wait in `_meta` as for a normal refusal. Redis started again on the same port: the
    limits apply again, without a restart of the server."""
    token = add_caller(db_path, "limited", tool_rate_limit="3/minute")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_RATE_LIMIT_STORAGE_URL=redis_server.url,
        TICKET_SERVER_RATE_LIMIT_FAILURE=policy,
        TICKET_SERVER_STATELESS_HTTP="true",
    )
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            assert (await client.call_tool("get_ticket_status_v2", ARGS)).is_error is False

            redis_server.stop()
            during = [await client.call_tool("get_ticket_status_v2", ARGS) for _ in range(5)]
            if policy == "open":
                assert all(r.is_error is False for r in during), [text_of(r) for r in during]
            else:
                for refused in during:
                    assert refused.is_error is True
                    text = text_of(refused)
                    assert "rate limiting is unavailable; try again shortly" in text
                    assert_no_leak(text)
                    assert redis_server.url not in text and "redis" not in text.lower()
                    assert refused.meta[META_KEY]["retry_after_seconds"] >= 1

            redis_server.start()  # same port, empty counters
            after = [await client.call_tool("get_ticket_status_v2", ARGS) for _ in range(4)]
            assert [r.is_error for r in after] == [False, False, False, True], [
                text_of(r) for r in after
            ]
            assert "Rate limit reached" in text_of(after[-1])
        assert server.process.poll() is None
    finally:
        stop(server.process)
    logs = server.logs()
    down = _log_lines(logs, "rate-limit storage unavailable")
    assert len(down) == 1, down  # once per outage, not once per call
    assert down[0]["level"] == "ERROR" and f"RATE_LIMIT_FAILURE={policy}" in down[0]["message"]
    assert len(_log_lines(logs, "rate-limit storage answers again")) == 1
    assert token not in logs


@pytest.fixture
def private_postgres():
    """A PostgreSQL cluster of this test's own (stopping it touches no other test) with
    the sample database `tickets`."""
    from tests.postgres import start_private_server

    server = start_private_server()
    try:
        import asyncio

        from ticket_server import db
        from ticket_server.admin.seeding import seed
        from ticket_server.settings import Settings

        server.psql("CREATE DATABASE tickets")
        db.upgrade(server.url("tickets"))
        asyncio.run(seed(Settings(database_url=server.url("tickets"))))
        yield server
    finally:
        server.remove()


async def test_c05b_postgresql_stopped_then_back(private_postgres) -> None:
    """C05 (b), PostgreSQL: the server stopped while ours runs: each tool answers isError
    "ticket database is unavailable" within a bounded time (no hang), without a DSN, SQL
    or traceback; the server started again: the next calls succeed, no restart of ours."""
    from fastmcp import Client as MemoryClient

    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    url = private_postgres.url("tickets")
    settings = Settings(database_url=url, database_timeout=2.0, tool_rate_limit="100000/minute")
    calls = [
        ("get_ticket_status_v2", ARGS),
        ("search_tickets_v2", {"query": "invoice"}),
        ("get_ticket_status", ARGS),
        ("search_tickets", {"query": "invoice"}),
    ]
    async with MemoryClient(build_server(settings), mode="2026-07-28") as client:
        for tool, arguments in calls:
            assert (await client.call_tool_mcp(tool, arguments)).isError is False

        private_postgres.stop()
        for tool, arguments in calls:
            started = time.monotonic()
            result = await client.call_tool_mcp(tool, arguments)
            elapsed = time.monotonic() - started
            text = text_of(result)
            assert result.isError is True and "ticket database is unavailable" in text, text
            assert_no_leak(text)
            assert str(private_postgres.port) not in text and "postgres" not in text.lower()
            assert elapsed < 20, f"{tool} took {elapsed:.1f}s while PostgreSQL was down"

        private_postgres.start()
        for tool, arguments in calls:
            result = await client.call_tool_mcp(tool, arguments)
            assert result.isError is False, text_of(result)
        assert (await client.call_tool_mcp("get_ticket_status_v2", ARGS)).structuredContent[
            "id"
        ] == "SUP-4412"


def _database_errors(server) -> float:
    import httpx2 as httpx

    text = httpx.get(f"{server.base}/metrics", timeout=10).text
    return float(
        next(
            line.split()[1]
            for line in text.splitlines()
            if line.startswith("ticket_server_database_errors_total ")
        )
    )


async def test_database_errors_metric_rises_on_a_real_outage(
    private_postgres, tmp_path: Path
) -> None:
    """The HTTP server's /metrics counts each call that found PostgreSQL down: 0 before,
    exactly 2 after two calls during the outage (each answered isError "ticket database
    is unavailable"), still 2 after PostgreSQL is back and a call succeeds."""
    url = private_postgres.url("tickets")
    token = add_caller(url, "tester")
    # The caller stays cached, so the outage meets the ticket reads and nothing else.
    server = start_http_server(
        url, tmp_path, TICKET_SERVER_DATABASE_TIMEOUT="2", TICKET_SERVER_CALLER_CACHE_SECONDS="600"
    )
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            assert (await client.call_tool("get_ticket_status_v2", ARGS)).is_error is False
            assert _database_errors(server) == 0

            private_postgres.stop()
            for tool, arguments in (
                ("get_ticket_status_v2", ARGS),
                ("search_tickets_v2", {"query": "invoice"}),
            ):
                failed = await client.call_tool(tool, arguments)
                assert failed.is_error and "ticket database is unavailable" in text_of(failed), (
                    text_of(failed)
                )
            assert _database_errors(server) == 2

            private_postgres.start()
            assert (await client.call_tool("get_ticket_status_v2", ARGS)).is_error is False
            assert _database_errors(server) == 2
    finally:
        stop(server.process)
