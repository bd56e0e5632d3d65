"""Writes under contention beside reads, same server, same run, on SQLite: 16 concurrent
callers adding internal notes to one ticket (every write is one serialised transaction
with its history, idempotency key and audit row) while a reader calls
`get_ticket_status_v2`; and the same reads alone first, as the baseline. SQLite (in WAL
mode, which the server sets on every connection), or
PostgreSQL (a private cluster, bench.common.Postgres; each run on a fresh copy).

    .venv/bin/python -m bench.writes --count 100000 [--writes 2000] [--writers 16] [--engine postgresql]

Prints write p50/p95 and throughput, and read p50/p95 alone and during the writes.

``--spread`` (issue 37, C49): writes to different tickets side by side. One writer adds
``--writes`` notes to one ticket, then ``--writers`` writers each add as many to a ticket
of its own, in the same run on the same copy; prints each phase's writes/s and the ratio
(target on PostgreSQL: at least 4x). ``--processes``: each of the writers is a server
process of its own (as replicas are), started together; else one server, one caller.
``--durable``: PostgreSQL with fsync and synchronous commit on, as a deployment runs it
(the default benchmark cluster turns them off, so a write there is all CPU).

    .venv/bin/python -m bench.writes --engine postgresql --count 10000 --spread --writes 300
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

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


def _settings(url: str, writers: int) -> Any:
    from ticket_server.settings import Settings

    return Settings(
        database_url=url,
        tool_rate_limit="1000000/second",
        write_rate_limit="1000000/second",
        confirm_writes=[],
        stdio_caller="bench",
        caller_concurrency=writers + 1,
        caller_share=writers + 1,  # the default share (2) would queue the writers of one caller
    )


async def _write_tickets(url: str, tickets: list[str], writes: int) -> tuple[list[float], float]:
    """One server, one caller: a writer per ticket of ``tickets``, each adding ``writes``
    internal notes to its ticket. Returns the write times (ms) and the seconds taken."""
    from fastmcp import Client

    from ticket_server.access.callers import CallerError, open_store
    from ticket_server.server import build_server

    settings = _settings(url, len(tickets))
    store = open_store(settings)
    try:
        await store.add("bench", ["tickets:read", "tickets:write"])
    except CallerError:  # added by an earlier phase on this copy
        pass
    await store.aclose()
    times: list[float] = []
    async with Client(build_server(settings)) as client:
        for ticket in tickets:  # warm-up: a pooled connection and the statements
            await client.call_tool("get_ticket_status_v2", {"ticket_id": ticket})

        async def writer(ticket: str) -> None:
            for i in range(writes):
                t = time.perf_counter()
                result = await client.call_tool(
                    "add_internal_note",
                    {"ticket_id": ticket, "note": f"bench note {i} about the refund"},
                    raise_on_error=False,
                )
                assert not result.is_error, result
                times.append((time.perf_counter() - t) * 1000)

        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(writer(t) for t in tickets))
        elapsed = time.perf_counter() - start
        _CPU.append((time.process_time() - cpu) / elapsed)
        return times, elapsed


_CPU: list[float] = []  # this process's CPU seconds per second of each phase (one server)


def _process_writer(url: str, ticket: str, writes: int, start_at: float, out: Any) -> None:
    async def run() -> tuple[list[float], float]:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        return await _write_tickets(url, [ticket], writes)

    out.put(asyncio.run(run()))


def _spread_processes(url: str, tickets: list[str], writes: int) -> tuple[list[float], float]:
    """A server process per ticket, started together; the seconds from the first write
    to the last one done."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 8.0  # the processes import and build their servers first
    procs = [
        ctx.Process(target=_process_writer, args=(url, t, writes, start_at, out)) for t in tickets
    ]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    times = [t for r, _ in results for t in r]
    return times, max(elapsed for _, elapsed in results)


async def _ticket_ids(url: str, count: int) -> list[str]:
    """The ids of ``count`` tickets of the data set, spread over it."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    async with engine.connect() as conn:
        ids = (await conn.execute(text("SELECT id FROM tickets ORDER BY pk"))).scalars().all()
    await engine.dispose()
    step = max(1, len(ids) // count)
    return list(ids[::step][:count])


def spread(url: str, writes: int, writers: int, processes: bool, mode: str) -> None:
    tickets = asyncio.run(_ticket_ids(url, writers + 1))
    one, one_s = asyncio.run(_write_tickets(url, tickets[-1:], writes))
    if processes:
        many, many_s = _spread_processes(url, tickets[:writers], writes)
    else:
        many, many_s = asyncio.run(_write_tickets(url, tickets[:writers], writes))
    solo, side = len(one) / one_s, len(many) / many_s
    how = "a server process each" if processes else "one server, one caller"
    log(
        f"add_internal_note  {mode}, 1 writer on 1 ticket: {solo:,.0f} writes/s, "
        f"p50 {percentile(one, 0.5):.2f} ms, p95 {percentile(one, 0.95):.2f} ms over {len(one):,}"
    )
    log(
        f"add_internal_note  {mode}, {writers} writers on {writers} tickets ({how}): "
        f"{side:,.0f} writes/s, p50 {percentile(many, 0.5):.2f} ms, "
        f"p95 {percentile(many, 0.95):.2f} ms over {len(many):,}"
    )
    busy = ", ".join(f"{c:.2f}" for c in _CPU)
    log(
        f"ratio {side / solo:.2f}x (target >= 4x on PostgreSQL); {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}; the server process's CPU s per s (each phase): {busy}"
    )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.writes")
    p.add_argument("--count", type=int, default=100_000, help="tickets in the data set")
    p.add_argument("--writes", type=int, default=2_000, help="writes in all")
    p.add_argument("--writers", type=int, default=16, help="concurrent writers on the one ticket")
    p.add_argument("--engine", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument(
        "--spread", action="store_true", help="one writer, then --writers on as many tickets"
    )
    p.add_argument("--processes", action="store_true", help="--spread: a server process each")
    p.add_argument(
        "--durable",
        action="store_true",
        help="postgresql: a cluster with fsync and synchronous commit on, as deployed",
    )
    args = p.parse_args()
    if args.spread:
        if args.engine == "postgresql":
            from bench.common import Postgres

            pg = Postgres(durable=args.durable)
            pg.start()
            try:
                url = pg.copy(args.count, "bench_writes")
                mode = "postgresql, durable" if args.durable else "postgresql, fsync off"
                spread(url, args.writes, args.writers, args.processes, mode)
            finally:
                pg.stop()
        else:
            with tempfile.TemporaryDirectory() as tmp:
                db = sqlite_copy(args.count, Path(tmp) / "tickets.db")
                spread(sqlite_url(db), args.writes, args.writers, args.processes, "sqlite (WAL)")
        return
    if args.engine == "postgresql":
        from bench.common import Postgres

        pg = Postgres(durable=args.durable)
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
