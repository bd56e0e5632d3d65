"""Issue 16, item 13: one caller's calls running at once are capped
(TICKET_SERVER_CALLER_CONCURRENCY, in the pipeline's gatekeeper), so its slow searches
cannot take every connection and worker thread from another caller's lookups."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from tests.access.conftest import audit_rows, modern_call
from tests.helpers import text_of
from tests.transports.conftest import add_caller as add_caller_sync
from tests.transports.conftest import start_http_server, stop
from ticket_server.settings import Settings


async def test_a_flood_of_searches_is_capped_and_another_caller_is_served(
    server_as, add_caller, settings
) -> None:
    await add_caller("flooder")
    await add_caller("other")
    flood_server = server_as(stdio_caller="flooder", caller_concurrency=2)
    other_server = server_as(stdio_caller="other", caller_concurrency=2)
    async with Client(flood_server) as flood, Client(other_server) as other:
        lookups: list[float] = []

        async def lookup() -> None:
            started = time.perf_counter()
            assert (
                await other.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            ).is_error is False
            lookups.append(time.perf_counter() - started)

        async def lookups_meanwhile() -> None:
            for _ in range(20):
                await lookup()

        floods, _ = await asyncio.gather(
            asyncio.gather(
                *(
                    flood.call_tool(
                        "search_tickets", {"query": "a", "limit": 50}, raise_on_error=False
                    )
                    for _ in range(60)
                )
            ),
            lookups_meanwhile(),
        )
    busy = [r for r in floods if r.is_error]
    assert busy and all("calls running" in text_of(r) for r in busy)
    assert all(not r.is_error for r in floods if r not in busy)
    lookups.sort()
    p99 = lookups[min(len(lookups) - 1, int(len(lookups) * 0.99))]
    print(
        f"\n60 concurrent searches, cap 2: {len(floods) - len(busy)} ran, {len(busy)} refused; "
        f"other caller's lookups p50 {statistics.median(lookups) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"
    )
    rows = [r for r in await audit_rows(settings) if r.caller == "flooder"]
    assert sum(
        r.outcome == "rate_limited" and r.detail == "too many calls running" for r in rows
    ) == len(busy)


@pytest.mark.slow
def test_other_callers_lookups_over_http_while_one_caller_floods_searches(
    db_path: Path, tmp_path: Path
) -> None:
    """One real HTTP server on loopback, default cap (8): 60 concurrent deprecated searches
    from one caller while another makes 50 lookups; prints the other caller's p50/p99."""
    import httpx2 as httpx

    flooder, other = add_caller_sync(db_path, "flooder"), add_caller_sync(db_path, "other")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_HTTP_RATE_LIMIT="100000/minute")
    outcomes: list[str] = []
    lookups: list[float] = []

    def search(i: int) -> None:
        with httpx.Client(timeout=60) as http:
            answer = modern_call(
                http,
                server.url,
                flooder,
                i,
                {"name": "search_tickets", "arguments": {"query": "e", "limit": 50}},
            )
            outcomes.append("busy" if "calls running" in answer.text else "ran")

    try:
        floods = [threading.Thread(target=search, args=(i,)) for i in range(60)]
        for t in floods:
            t.start()
        with httpx.Client(timeout=60) as http:
            for i in range(50):
                started = time.perf_counter()
                answer = modern_call(
                    http,
                    server.url,
                    other,
                    i,
                    {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-4412"}},
                )
                lookups.append(time.perf_counter() - started)
                assert answer.status_code == 200 and '"isError":true' not in answer.text.replace(
                    " ", ""
                )
        for t in floods:
            t.join()
    finally:
        stop(server.process)
    lookups.sort()
    print(
        f"\nHTTP, 60 concurrent searches by one caller (cap 8): {outcomes.count('ran')} ran, "
        f"{outcomes.count('busy')} refused; the other caller's 50 lookups: p50 "
        f"{statistics.median(lookups) * 1000:.1f} ms, p99 {lookups[int(len(lookups) * 0.99)] * 1000:.1f} ms"
    )


@pytest.mark.postgresql_only
async def test_the_cap_admits_exactly_that_many_calls(
    server_as: Any, add_caller: Any, settings: Settings
) -> None:
    """With TICKET_SERVER_CALLER_CONCURRENCY=3, three of one caller's calls run at once
    and the fourth is refused, no more and no fewer: the calls are held running on a
    locked tickets table (PostgreSQL shows each one waiting, so the test knows they run),
    and all three are answered once it is released. (PostgreSQL: SQLite shows no sign of
    a waiting reader.)"""
    from tests.postgres import lock_waiters, wait_for_lock_waiters
    from tests.transports.conftest import database_locked

    await add_caller("busy")
    server = server_as(
        stdio_caller="busy", caller_concurrency=3, database_timeout=60.0, tool_timeout=60.0
    )
    lookup = ("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
    async with Client(server) as client:
        assert not (await client.call_tool(*lookup)).is_error  # the caller is cached now
        with database_locked(settings.database_url):
            held = []
            for running in (1, 2, 3):  # each one admitted: it reaches the locked table
                held.append(asyncio.create_task(client.call_tool(*lookup, raise_on_error=False)))
                await asyncio.to_thread(wait_for_lock_waiters, settings.database_url, running)
            fourth = asyncio.create_task(client.call_tool(*lookup, raise_on_error=False))
            done, _ = await asyncio.wait({fourth}, timeout=10)
            assert done, "a fourth call was admitted past the cap of 3"
            assert fourth.result().is_error and "3 calls running" in text_of(fourth.result())
            assert lock_waiters(settings.database_url) == 3
        answered = await asyncio.gather(*held)
    assert [r.is_error for r in answered] == [False, False, False]
