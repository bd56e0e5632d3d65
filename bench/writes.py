"""Writes under contention beside reads, same server, same run, on SQLite: 16 concurrent
callers adding internal notes to one ticket (every write is one serialised transaction
with its history, idempotency key and audit row) while a reader calls
`get_ticket_status_v2`; and the same reads alone first, as the baseline. SQLite (in WAL
mode, which the server sets on every connection), or
PostgreSQL (a private cluster, bench.common.Postgres; each run on a fresh copy).

    .venv/bin/python -m bench.writes --count 100000 [--writes 2000] [--writers 16] [--engine postgresql]

Prints write p50/p95 and throughput, and read p50/p95 alone and during the writes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench.common import log, percentile, sqlite_copy, sqlite_url

TICKET = "SUP-4412"


async def _reads(client, stop: asyncio.Event | None, count: int) -> list[float]:
    times: list[float] = []
    while (stop is None and len(times) < count) or (stop is not None and not stop.is_set()):
        t = time.perf_counter()
        await client.call_tool("get_ticket_status_v2", {"ticket_id": TICKET})
        times.append((time.perf_counter() - t) * 1000)
    return times


async def _run(
    url: str, writes: int, writers: int
) -> tuple[list[float], float, list[float], list[float]]:
    from fastmcp import Client

    from ticket_server.access.callers import open_store
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    settings = Settings(
        database_url=url,
        tool_rate_limit="1000000/second",
        write_rate_limit="1000000/second",
        confirm_writes=[],
        stdio_caller="bench",
        caller_concurrency=writers + 1,
    )  # one caller: the writers and the reader
    store = open_store(settings)
    await store.add("bench", ["tickets:read", "tickets:write"])
    await store.aclose()
    async with Client(build_server(settings)) as client:
        for _ in range(100):  # warm-up
            await client.call_tool("get_ticket_status_v2", {"ticket_id": TICKET})
        alone = await _reads(client, None, writes)
        write_times: list[float] = []
        queue = iter(range(writes))

        async def writer() -> None:
            for i in queue:
                t = time.perf_counter()
                result = await client.call_tool(
                    "add_internal_note",
                    {"ticket_id": TICKET, "note": f"bench {i}"},
                    raise_on_error=False,
                )
                assert not result.is_error, result
                write_times.append((time.perf_counter() - t) * 1000)

        stop = asyncio.Event()
        reader = asyncio.create_task(_reads(client, stop, 0))
        start = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        elapsed = time.perf_counter() - start
        stop.set()
        during = await reader
    return write_times, elapsed, alone, during


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.writes")
    p.add_argument("--count", type=int, default=100_000, help="tickets in the data set")
    p.add_argument("--writes", type=int, default=2_000, help="writes in all")
    p.add_argument("--writers", type=int, default=16, help="concurrent writers on the one ticket")
    p.add_argument("--engine", choices=["sqlite", "postgresql"], default="sqlite")
    args = p.parse_args()
    if args.engine == "postgresql":
        from bench.common import Postgres

        pg = Postgres()
        pg.start()
        try:
            writes, elapsed, alone, during = asyncio.run(
                _run(pg.copy(args.count, "bench_writes"), args.writes, args.writers)
            )
        finally:
            pg.stop()
        mode = "postgresql"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            db = sqlite_copy(args.count, Path(tmp) / "tickets.db")
            writes, elapsed, alone, during = asyncio.run(
                _run(sqlite_url(db), args.writes, args.writers)
            )
        mode = "sqlite (WAL)"
    log(
        f"add_internal_note     {mode} {args.count:>9,} tickets, {args.writers} writers on one ticket: "
        f"p50 {percentile(writes, 0.5):.2f} ms, p95 {percentile(writes, 0.95):.2f} ms, "
        f"{len(writes) / elapsed:,.0f} writes/s over {len(writes):,} writes"
    )
    log(
        f"get_ticket_status_v2  alone:         p50 {percentile(alone, 0.5):.2f} ms, "
        f"p95 {percentile(alone, 0.95):.2f} ms over {len(alone):,} calls"
    )
    log(
        f"get_ticket_status_v2  during writes: p50 {percentile(during, 0.5):.2f} ms, "
        f"p95 {percentile(during, 0.95):.2f} ms over {len(during):,} calls"
    )


if __name__ == "__main__":
    main()
