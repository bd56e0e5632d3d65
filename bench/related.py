"""Related tickets (issue 36): find_similar_tickets latency beside get_ticket_status_v2,
and one bulk change of N tickets beside N single writes, same server, same run.

    .venv/bin/python -m bench.related --count 10000 [--similar 200] [--bulk 500] [--engine postgresql]

Prints find_similar_tickets p50/p95 over `--similar` tickets drawn at random (seed 36),
and for a caller of one queue over as many of its tickets,
how many of the first ten of the first 40 of them the exact rank also puts first
(search_tickets_v2 with the words it used, over every ticket),
get_ticket_status_v2 p50/p95 over as many calls, then the seconds of one
bulk_update_tickets (owner change) dry run and confirmed run over `--bulk` open
tickets, and of `--bulk` assign_ticket calls, one after another, on other open tickets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench.common import log, percentile, sqlite_copy, sqlite_url

SCOPED_QUEUE = "security"
"""The queue of the scoped caller: the smallest of the generated ones (8% of tickets)."""
AGREEMENT = 40
"""Tickets whose first ten similar tickets are compared with the exact rank's."""


async def _ids(url: str, where: str, limit: int) -> list[str]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(f"SELECT id FROM tickets WHERE {where} ORDER BY pk LIMIT {limit}")
            )
            return [r[0] for r in rows]
    finally:
        await engine.dispose()


async def _timed(call) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    result = await call
    assert not result.is_error, result
    return (time.perf_counter() - t) * 1000


async def _run(url: str, similar: int, bulk: int) -> dict[str, object]:
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
        toolsets=["read", "respond", "triage", "related"],
        bulk_max_tickets=max(bulk, 1),
        tool_timeout=600,
    )
    store = open_store(settings)
    await store.add("bench", ["tickets:read", "tickets:write"])
    await store.add("bench.queue", ["tickets:read"], queues=[SCOPED_QUEUE])
    await store.aclose()
    everyone = await _ids(url, "1 = 1", 1_000_000_000)
    sample = random.Random(36).sample(everyone, min(similar, len(everyone)))
    in_queue = await _ids(url, f"queue = '{SCOPED_QUEUE}'", 1_000_000_000)
    scoped_sample = random.Random(36).sample(in_queue, min(similar, len(in_queue)))
    open_ = await _ids(url, "status <> 'closed'", 2 * bulk)
    assert len(open_) == 2 * bulk, "not enough open tickets for --bulk"
    out: dict[str, object] = {}
    async with Client(build_server(settings)) as client:
        for tid in sample[:20]:  # warm-up
            await client.call_tool("find_similar_tickets", {"ticket_id": tid})
        out["similar"] = [
            await _timed(client.call_tool("find_similar_tickets", {"ticket_id": t})) for t in sample
        ]
        agreed = 0
        for tid in sample[:AGREEMENT]:
            similar = await client.call_tool("find_similar_tickets", {"ticket_id": tid})
            page = similar.structured_content
            found = [hit["id"] for hit in page["tickets"]]
            exact: list[str] = []
            if page["words"]:  # the same words' exact relevance search, the ticket left out
                search = await client.call_tool(
                    "search_tickets_v2", {"query": " ".join(page["words"]), "limit": 11}
                )
                exact = [h["id"] for h in search.structured_content["tickets"] if h["id"] != tid]
            agreed += len(set(found) & set(exact[:10])) / max(len(exact[:10]), 1)
        out["agreement"] = agreed / len(sample[:AGREEMENT])
    scoped = settings.model_copy(update={"stdio_caller": "bench.queue"})
    async with Client(build_server(scoped)) as client:
        out["scoped"] = [
            await _timed(client.call_tool("find_similar_tickets", {"ticket_id": t}))
            for t in scoped_sample
        ]
    async with Client(build_server(settings)) as client:
        out["status"] = [
            await _timed(client.call_tool("get_ticket_status_v2", {"ticket_id": t})) for t in sample
        ]
        change = {"owner": "bench.bulk"}
        t = time.perf_counter()
        dry = await client.call_tool("bulk_update_tickets", {"ticket_ids": open_[:bulk], **change})
        out["dry"] = time.perf_counter() - t
        token = dry.structured_content["plan_token"]
        t = time.perf_counter()
        done = await client.call_tool(
            "bulk_update_tickets", {**change, "dry_run": False, "plan_token": token}
        )
        out["bulk"] = time.perf_counter() - t
        out["written"] = len(done.structured_content["tickets"])
        t = time.perf_counter()
        for tid in open_[bulk:]:
            await client.call_tool("assign_ticket", {"ticket_id": tid, "owner": "bench.single"})
        out["single"] = time.perf_counter() - t
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.related")
    p.add_argument("--count", type=int, default=10_000, help="tickets in the data set")
    p.add_argument("--similar", type=int, default=200, help="find_similar_tickets calls")
    p.add_argument("--bulk", type=int, default=500, help="tickets of the bulk change")
    p.add_argument("--engine", choices=["sqlite", "postgresql"], default="sqlite")
    args = p.parse_args()
    if args.engine == "postgresql":
        from bench.common import Postgres

        pg = Postgres()
        pg.start()
        try:
            out = asyncio.run(_run(pg.copy(args.count, "bench_related"), args.similar, args.bulk))
        finally:
            pg.stop()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            db = sqlite_copy(args.count, Path(tmp) / "tickets.db")
            out = asyncio.run(_run(sqlite_url(db), args.similar, args.bulk))
    similar, status = out["similar"], out["status"]
    assert isinstance(similar, list) and isinstance(status, list)
    agreement = out["agreement"]
    assert isinstance(agreement, float)
    load = os.getloadavg()
    log(f"{args.engine} {args.count:,} tickets, load average {load[0]:.1f} {load[1]:.1f}")
    log(
        f"find_similar_tickets  p50 {percentile(similar, 0.5):.2f} ms, "
        f"p95 {percentile(similar, 0.95):.2f} ms over {len(similar)} tickets"
    )
    scoped = out["scoped"]
    assert isinstance(scoped, list)
    log(
        f"find_similar_tickets  p50 {percentile(scoped, 0.5):.2f} ms, "
        f"p95 {percentile(scoped, 0.95):.2f} ms over {len(scoped)} tickets, "
        f"a caller of queue {SCOPED_QUEUE} only"
    )
    log(
        f"find_similar_tickets  first ten as the exact rank's (search_tickets_v2 with its "
        f"words, over every ticket): {100 * agreement:.1f}% "
        f"over {AGREEMENT} tickets"
    )
    log(
        f"get_ticket_status_v2  p50 {percentile(status, 0.5):.2f} ms, "
        f"p95 {percentile(status, 0.95):.2f} ms over {len(status)} calls"
    )
    log(
        f"bulk_update_tickets   {args.bulk} tickets: dry run {out['dry']:.2f} s, "
        f"confirmed run {out['bulk']:.2f} s ({out['written']} written)"
    )
    log(f"assign_ticket         {args.bulk} single calls one after another: {out['single']:.2f} s")


if __name__ == "__main__":
    main()
