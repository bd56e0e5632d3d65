"""Issue 16, item 13: one caller's calls running at once are capped
(TICKET_SERVER_CALLER_CONCURRENCY, in the pipeline's gatekeeper), so its slow searches
cannot take every connection and worker thread from another caller's lookups."""

from __future__ import annotations

import asyncio
import statistics
import time

from fastmcp import Client

from tests.helpers import text_of
from tests.access.conftest import audit_rows


async def test_a_flood_of_searches_is_capped_and_another_caller_is_served(server_as, add_caller, settings) -> None:
    await add_caller("flooder")
    await add_caller("other")
    flood_server = server_as(stdio_caller="flooder", caller_concurrency=2)
    other_server = server_as(stdio_caller="other", caller_concurrency=2)
    async with Client(flood_server) as flood, Client(other_server) as other:
        lookups: list[float] = []

        async def lookup() -> None:
            started = time.perf_counter()
            assert (await other.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})).is_error is False
            lookups.append(time.perf_counter() - started)

        async def lookups_meanwhile() -> None:
            for _ in range(20):
                await lookup()

        floods, _ = await asyncio.gather(
            asyncio.gather(*(flood.call_tool("search_tickets", {"query": "a", "limit": 50}, raise_on_error=False)
                             for _ in range(60))),
            lookups_meanwhile(),
        )
    busy = [r for r in floods if r.is_error]
    assert busy and all("calls running" in text_of(r) for r in busy)
    assert all(not r.is_error for r in floods if r not in busy)
    lookups.sort()
    p99 = lookups[min(len(lookups) - 1, int(len(lookups) * 0.99))]
    print(f"\n60 concurrent searches, cap 2: {len(floods) - len(busy)} ran, {len(busy)} refused; "
          f"other caller's lookups p50 {statistics.median(lookups) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    rows = [r for r in await audit_rows(settings) if r.caller == "flooder"]
    assert sum(r.outcome == "rate_limited" and r.detail == "too many calls running" for r in rows) == len(busy)
