"""`open_ticket` and `set_ticket_fields` beside `get_ticket_status_v2`, same server, same
run, alternating call by call on one caller (SQLite in WAL mode, or PostgreSQL on a
private cluster). Each write is one transaction: `set_ticket_fields` with its ticket
lock, the definitions' check, the typed upsert, the version bump and the audit row;
`open_ticket` with the queue and requester checks, the new ticket's number, its search
postings, its SLA columns and the audit row.

    .venv/bin/python -m bench.classification --count 10000 [--calls 500] [--engine postgresql]

Prints p50/p95 of each and each write's p95 over the lookup's (issue 33's target: within
4x).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastmcp import Client

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench.common import log, percentile, sqlite_copy, sqlite_url

TICKET = "SUP-4412"


async def _timed(client: Client[Any], name: str, arguments: dict[str, Any]) -> float:
    """One call's wall time in ms; a tool error stops the benchmark."""
    t = time.perf_counter()
    result = await client.call_tool(name, arguments, raise_on_error=False)
    assert not result.is_error, result
    return (time.perf_counter() - t) * 1000


async def _run(url: str, calls: int) -> dict[str, list[float]]:
    from fastmcp import Client
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from ticket_server.access.callers import open_store
    from ticket_server.admin.classification import seed_classification
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    engine = create_async_engine(url)  # a data set of an older revision has no definitions
    async with engine.begin() as conn:
        await conn.run_sync(seed_classification, False)
        customer = (
            await conn.execute(text("SELECT id FROM customers ORDER BY pk LIMIT 1"))
        ).scalar()
    await engine.dispose()
    settings = Settings(
        database_url=url,
        tool_rate_limit="1000000/second",
        write_rate_limit="1000000/second",
        confirm_writes=[],
        toolsets=["read", "intake", "classify"],
        stdio_caller="bench",
    )
    store = open_store(settings)
    await store.add("bench", ["tickets:read", "tickets:write"])
    await store.aclose()
    times: dict[str, list[float]] = {name: [] for name in NAMES}
    async with Client(build_server(settings)) as client:
        for i in range(50 + calls):  # the first 50 of each warm up
            took = {
                "open_ticket": await _timed(
                    client,
                    "open_ticket",
                    {
                        "subject": f"Invoice {i} shows the wrong billing address",
                        "body": "Our invoice lists last year's address; please correct it.",
                        "queue": "billing",
                        "customer_id": customer,
                        "custom_fields": {"affected_users": i},
                    },
                ),
                "set_ticket_fields": await _timed(
                    client,
                    "set_ticket_fields",
                    {
                        "ticket_id": TICKET,
                        "fields": {"affected_users": i, "external_ref": f"B-{i}"},
                    },
                ),
                "get_ticket_status_v2": await _timed(
                    client, "get_ticket_status_v2", {"ticket_id": TICKET}
                ),
            }
            if i >= 50:
                for name, ms in took.items():
                    times[name].append(ms)
    return times


NAMES = ("open_ticket", "set_ticket_fields", "get_ticket_status_v2")


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
            times = asyncio.run(_run(pg.copy(args.count, "bench_fields"), args.calls))
        finally:
            pg.stop()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            db = sqlite_copy(args.count, Path(tmp) / "tickets.db")
            times = asyncio.run(_run(sqlite_url(db), args.calls))
    load = os.getloadavg()
    for name in NAMES:
        log(
            f"{name:<21} {args.engine} {args.count:>9,} tickets: p50 "
            f"{percentile(times[name], 0.5):.2f} ms, p95 {percentile(times[name], 0.95):.2f} ms "
            f"over {len(times[name]):,} calls"
        )
    lookup = percentile(times["get_ticket_status_v2"], 0.95)
    for name in NAMES[:-1]:
        log(
            f"{name} p95 / lookup p95: {percentile(times[name], 0.95) / lookup:.1f}x (target within 4x)"
        )
    log(f"load average {load[0]:.1f}")


if __name__ == "__main__":
    main()
