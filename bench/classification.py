"""`set_ticket_fields` beside `get_ticket_status_v2`, same server, same run, alternating
call by call on one caller (SQLite in WAL mode, or PostgreSQL on a private cluster): each
write is one transaction with its ticket lock, the definitions' check, the typed upsert,
the version bump and the audit row.

    .venv/bin/python -m bench.classification --count 10000 [--calls 500] [--engine postgresql]

Prints p50/p95 of each and the ratio of the p95s (issue 33's target: within 4x).
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


async def _run(url: str, calls: int) -> tuple[list[float], list[float]]:
    from fastmcp import Client
    from sqlalchemy.ext.asyncio import create_async_engine

    from ticket_server.access.callers import open_store
    from ticket_server.admin.classification import seed_classification
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    engine = create_async_engine(url)  # a data set of an older revision has no definitions
    async with engine.begin() as conn:
        await conn.run_sync(seed_classification, False)
    await engine.dispose()
    settings = Settings(
        database_url=url,
        tool_rate_limit="1000000/second",
        write_rate_limit="1000000/second",
        confirm_writes=[],
        stdio_caller="bench",
    )
    store = open_store(settings)
    await store.add("bench", ["tickets:read", "tickets:write"])
    await store.aclose()
    writes: list[float] = []
    reads: list[float] = []
    async with Client(build_server(settings)) as client:
        for i in range(50 + calls):  # the first 50 of each warm up
            t = time.perf_counter()
            result = await client.call_tool(
                "set_ticket_fields",
                {"ticket_id": TICKET, "fields": {"affected_users": i, "external_ref": f"B-{i}"}},
                raise_on_error=False,
            )
            assert not result.is_error, result
            took = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await client.call_tool("get_ticket_status_v2", {"ticket_id": TICKET})
            if i >= 50:
                writes.append(took)
                reads.append((time.perf_counter() - t) * 1000)
    return writes, reads


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.classification")
    p.add_argument("--count", type=int, default=10_000, help="tickets in the data set")
    p.add_argument("--calls", type=int, default=500, help="calls of each tool")
    p.add_argument("--engine", choices=["sqlite", "postgresql"], default="sqlite")
    args = p.parse_args()
    if args.engine == "postgresql":
        from bench.common import Postgres

        pg = Postgres()
        pg.start()
        try:
            writes, reads = asyncio.run(_run(pg.copy(args.count, "bench_fields"), args.calls))
        finally:
            pg.stop()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            db = sqlite_copy(args.count, Path(tmp) / "tickets.db")
            writes, reads = asyncio.run(_run(sqlite_url(db), args.calls))
    load = os.getloadavg()
    for name, times in (("set_ticket_fields", writes), ("get_ticket_status_v2", reads)):
        log(
            f"{name:<21} {args.engine} {args.count:>9,} tickets: p50 {percentile(times, 0.5):.2f} ms, "
            f"p95 {percentile(times, 0.95):.2f} ms over {len(times):,} calls"
        )
    ratio = percentile(writes, 0.95) / percentile(reads, 0.95)
    log(f"p95 ratio {ratio:.1f}x (target within 4x); load average {load[0]:.1f}")


if __name__ == "__main__":
    main()
