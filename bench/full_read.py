"""The full read of a ticket with 50 comments (`get_ticket`, every field) beside
`get_ticket_status_v2` on the same ticket, same server, same run: latency p50/p95 per
call over the in-memory client with all middleware on, on SQLite.

    .venv/bin/python -m bench.full_read --count 100000 [--calls 2000]

The data set is the generated one (tickets, comments, events) of ``--count`` tickets;
SUP-4412 is given 44 more comments (50 in all) in a private copy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench.common import log, percentile, sqlite_copy, sqlite_url  # noqa: E402

TICKET = "SUP-4412"
COMMENTS = 50


async def _run(db: Path, calls: int) -> dict[str, list[float]]:
    from fastmcp import Client

    from ticket_server.db import open_repository
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    settings = Settings(database_url=sqlite_url(db), tool_rate_limit="1000000/second")
    repo = open_repository(settings)
    view = await repo.ticket_view(TICKET, None, comments_before=None, comment_limit=COMMENTS, event_limit=1)
    assert view is not None
    start = datetime(2026, 7, 15, tzinfo=UTC)
    await repo.add_all((), comments=[{
        "ticket_id": TICKET, "author": "r.mehta", "author_type": "agent", "visibility": "internal",
        "body": f"Bench note {i}: checked the payment log again; nothing new.", "created_at": start + timedelta(hours=i),
    } for i in range(COMMENTS - view.comment_total)])
    await repo.aclose()
    out: dict[str, list[float]] = {"get_ticket": [], "get_ticket_status_v2": []}
    async with Client(build_server(settings)) as client:
        for name in out:  # warm-up
            for _ in range(100):
                assert not (await client.call_tool(name, {"ticket_id": TICKET})).is_error
        for _ in range(calls):
            for name, times in out.items():  # alternate, so both see the same machine load
                t = time.perf_counter()
                await client.call_tool(name, {"ticket_id": TICKET})
                times.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.full_read")
    p.add_argument("--count", type=int, default=100_000, help="tickets in the data set")
    p.add_argument("--calls", type=int, default=2_000, help="calls per tool")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(args.count, Path(tmp) / "tickets.db")
        results = asyncio.run(_run(db, args.calls))
    for name, times in results.items():
        log(f"{name:22s} sqlite {args.count:>9,} tickets: p50 {percentile(times, 0.5):.2f} ms, "
            f"p95 {percentile(times, 0.95):.2f} ms over {len(times):,} calls (in memory, all middleware)")


if __name__ == "__main__":
    main()
