"""The full read of a ticket with 50 comments (`get_ticket`, every field, its default page
of comments) beside `get_ticket_status_v2` on the same ticket, same server, same run:
latency p50/p95 per call over the in-memory client with all middleware on, on SQLite and
PostgreSQL.

    .venv/bin/python -m bench.full_read --count 100000 [--calls 2000] [--engines sqlite,postgresql]

The data set is the generated one (tickets, comments, events) of ``--count`` tickets, in
a private copy (a file copy on SQLite, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL, as
bench/writes.py does), where SUP-4412 is given more comments (50 in all): the cached data
set stays as generated.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench.common import Postgres, engines_ready, log, percentile, sqlite_copy, sqlite_url

TICKET = "SUP-4412"
COMMENTS = 50
CALLS = 2_000
TOOLS = ("get_ticket", "get_ticket_status_v2")


async def _give_comments(url: str) -> None:
    """Add comments to TICKET until it has COMMENTS, in one transaction."""
    from sqlalchemy import func, select

    from ticket_server.db import create_engine
    from ticket_server.settings import Settings
    from ticket_server.tickets.models import Comment
    from ticket_server.tickets.repository import insert_tickets

    engine = create_engine(Settings(database_url=url))
    start = datetime(2026, 7, 15, tzinfo=UTC)
    try:
        async with engine.begin() as conn:
            have = (
                await conn.execute(
                    select(func.count()).select_from(Comment).where(Comment.ticket_id == TICKET)
                )
            ).scalar_one()
            comments = [
                {
                    "ticket_id": TICKET,
                    "author": "r.mehta",
                    "author_type": "agent",
                    "visibility": "internal",
                    "body": f"Bench note {i}: checked the payment log again; nothing new.",
                    "created_at": start + timedelta(hours=i),
                }
                for i in range(COMMENTS - have)
            ]
            await conn.run_sync(insert_tickets, (), comments)
    finally:
        await engine.dispose()


async def _measure(url: str, calls: int) -> dict[str, list[float]]:
    from fastmcp import Client

    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    await _give_comments(url)
    settings = Settings(database_url=url, tool_rate_limit="1000000/second")
    out: dict[str, list[float]] = {name: [] for name in TOOLS}
    async with Client(build_server(settings)) as client:
        for name in out:  # warm-up
            for _ in range(100):
                assert not (await client.call_tool(name, {"ticket_id": TICKET})).is_error
        for _ in range(calls):
            for name, times in out.items():  # alternate, so both see the same machine load
                t = time.perf_counter()
                result = await client.call_tool(name, {"ticket_id": TICKET}, raise_on_error=False)
                times.append((time.perf_counter() - t) * 1000)
                assert not result.is_error, result.content
    return out


@contextmanager
def _copy(engine: str, count: int, pg: Postgres | None) -> Iterator[str]:
    """The URL of a private copy of the ``count`` data set, removed afterwards."""
    if engine == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield sqlite_url(sqlite_copy(count, Path(tmp) / "tickets.db"))
        return
    assert pg is not None
    name = "bench_full_read"
    url = pg.copy(count, name)
    try:
        yield url
    finally:
        pg.psql(f"DROP DATABASE IF EXISTS {name}")


def run(
    sizes: tuple[int, ...], engines: tuple[str, ...], calls: int = CALLS
) -> dict[str, dict[str, object]]:
    """``{"engine/size": {tool: {"p50", "p95", "calls"}}}``, milliseconds."""
    out: dict[str, dict[str, object]] = {}
    with engines_ready(engines, "full read") as ready:
        for engine, pg in ready:
            for n in sizes:
                log(f"full read: {engine} {n:,} tickets ...")
                with _copy(engine, n, pg) as url:
                    times = asyncio.run(_measure(url, calls))
                out[f"{engine}/{n}"] = {
                    name: {"p50": percentile(t, 0.5), "p95": percentile(t, 0.95), "calls": len(t)}
                    for name, t in times.items()
                }
                for name, x in out[f"{engine}/{n}"].items():
                    log(
                        f"  {name:22s} p50 {x['p50']:.2f} ms, p95 {x['p95']:.2f} ms over {x['calls']:,} calls"
                    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.full_read")
    p.add_argument("--count", type=int, default=100_000, help="tickets in the data set")
    p.add_argument("--calls", type=int, default=CALLS, help="calls per tool")
    p.add_argument("--engines", default="sqlite,postgresql")
    args = p.parse_args()
    run((args.count,), tuple(args.engines.split(",")), args.calls)


if __name__ == "__main__":
    main()
