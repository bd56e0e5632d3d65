"""Load over HTTP on loopback: 64 concurrent callers, each with its own token, for a
bounded number of calls (and a time cap), against the real server process. Asserts
correctness only: no 5xx, no dropped or mismatched reply, memory flat after warm-up.
Prints p50/p99 latency and throughput (to the terminal, with or without ``-s``)."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.conftest import sqlite_url
from tests.transports.conftest import start_http_server, stop
from tests.transports.test_stdio import INIT, INITIALIZED
from ticket_server.settings import Settings

pytestmark = pytest.mark.sqlite_only

CALLERS = 64
CALLS_PER_CALLER = 25
TIME_CAP = 120.0  # seconds: the test stops by itself whatever the machine


def _add_callers(db_path: Path, n: int) -> list[str]:
    from ticket_server.access.callers import open_store

    async def main() -> list[str]:
        store = open_store(Settings(database_url=sqlite_url(db_path)))
        try:
            return [
                t for t in [await store.add(f"load-{i}", ["tickets:read"]) for i in range(n)] if t
            ]
        finally:
            await store.aclose()

    return asyncio.run(main())


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _caller(
    url: str,
    token: str,
    index: int,
    calls: int,
    deadline: float,
    latencies: list[float],
    failures: list[str],
) -> int:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    done = 0
    async with httpx.AsyncClient(timeout=60) as client:
        init = await client.post(url, json=INIT, headers=headers)
        if init.status_code != 200:
            failures.append(f"caller {index}: initialize {init.status_code}")
            return 0
        if init.headers.get("mcp-session-id"):
            headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
        await client.post(url, json=INITIALIZED, headers=headers)
        for n in range(calls):
            if time.monotonic() > deadline:
                break
            request_id = index * 1000 + n
            tool, arguments = (
                ("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
                if n % 2 == 0
                else ("search_tickets_v2", {"query": "invoice", "limit": 5})
            )
            started = time.perf_counter()
            response = await client.post(
                url,
                headers=headers,
                json={
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                },
            )
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                failures.append(f"caller {index} call {n}: HTTP {response.status_code}")
                continue
            body = response.json()
            if body.get("id") != request_id or body.get("result", {}).get("isError") is not False:
                failures.append(f"caller {index} call {n}: {str(body)[:200]}")
                continue
            done += 1
    return done


def test_load_64_concurrent_callers(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """64 callers at once over HTTP with the shipped default limits (each caller stays
    under them: 14 calls of each tool, 32 HTTP requests): every call answered
    correctly, none refused, no 5xx, RSS flat. The limiter runs at full load, so a
    limit counted for all callers together instead of per caller shows here."""
    tokens = _add_callers(db_path, CALLERS)
    assert len(tokens) == CALLERS
    defaults = Settings.model_fields
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_LOG_LEVEL="WARNING",
        TICKET_SERVER_TOOL_RATE_LIMIT=defaults["tool_rate_limit"].default,
        TICKET_SERVER_HTTP_RATE_LIMIT=defaults["http_rate_limit"].default,
    )
    try:

        async def run(calls: int) -> tuple[list[int], list[float], list[str], float]:
            latencies: list[float] = []
            failures: list[str] = []
            deadline = time.monotonic() + TIME_CAP
            started = time.perf_counter()
            done = await asyncio.gather(
                *(
                    _caller(server.url, token, i, calls, deadline, latencies, failures)
                    for i, token in enumerate(tokens)
                )
            )
            return list(done), latencies, failures, time.perf_counter() - started

        _, _, warm_failures, _ = asyncio.run(run(3))  # warm-up
        assert not warm_failures, warm_failures[:5]
        rss_before = _rss_kib(server.process.pid)
        done, latencies, failures, elapsed = asyncio.run(run(CALLS_PER_CALLER))
        rss_after = _rss_kib(server.process.pid)
    finally:
        stop(server.process)
    assert not failures, failures[:5]
    assert sum(done) == CALLERS * CALLS_PER_CALLER or elapsed >= TIME_CAP, "no dropped request"
    assert all(n > 0 for n in done)
    quantiles = statistics.quantiles(latencies, n=100)
    summary = (
        f"\nload: {CALLERS} callers, {sum(done)} calls in {elapsed:.1f}s = "
        f"{sum(done) / elapsed:.0f} calls/s; latency p50 {quantiles[49] * 1000:.0f} ms, "
        f"p99 {quantiles[98] * 1000:.0f} ms; server RSS {rss_before // 1024} -> {rss_after // 1024} MiB"
    )
    with capsys.disabled():
        print(summary)
    assert "Traceback" not in server.logs()
    assert rss_after - rss_before < 64 * 1024, "memory flat after warm-up (< 64 MiB growth)"
