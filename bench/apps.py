"""The queue board's data (`get_queue_board`, app-only, MCP Apps) of the data set's
largest queue beside `get_ticket_status_v2` on SUP-4412, alternating in the same run on
the same server: latency p50/p95 per call over the in-memory client (with the MCP Apps
extension declared, all middleware on), SQLite. By hand; figures in ANALYSIS.md.

    .venv/bin/python -m bench.apps --count 10000 [--calls 500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench.common import log, percentile, sqlite_dataset, sqlite_url


async def _measure(url: str, calls: int) -> dict[str, list[float]]:
    import sqlite3

    from fastmcp import Client
    from fastmcp.apps import UI_EXTENSION_ID, UI_MIME_TYPE
    from mcp.client.extension import advertise

    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    path = url.removeprefix("sqlite+aiosqlite:///")
    con = sqlite3.connect(path)
    (queue,) = con.execute(
        "SELECT queue FROM tickets GROUP BY queue ORDER BY count(*) DESC LIMIT 1"
    ).fetchone()
    con.close()
    settings = Settings(database_url=url, tool_rate_limit="1000000/second")
    calls_of = {
        "get_queue_board": {"queue": queue},
        "get_ticket_status_v2": {"ticket_id": "SUP-4412"},
    }
    out: dict[str, list[float]] = {name: [] for name in calls_of}
    extension = advertise(UI_EXTENSION_ID, {"mimeTypes": [UI_MIME_TYPE]})
    async with Client(build_server(settings), extensions=[extension]) as client:
        for name, arguments in calls_of.items():  # warm-up
            for _ in range(20):
                await client.call_tool(name, arguments)
        for _ in range(calls):
            for name, arguments in calls_of.items():
                t = time.perf_counter()
                await client.call_tool(name, arguments)
                out[name].append((time.perf_counter() - t) * 1000)
    log(f"queue {queue!r}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    url = sqlite_url(sqlite_dataset(args.count))
    figures = asyncio.run(_measure(url, args.calls))
    print(f"os.getloadavg(): {os.getloadavg()}")
    for name, values in figures.items():
        print(
            f"{args.count:>9,} tickets  {name:22}  p50 {percentile(values, 0.5):7.2f} ms  "
            f"p95 {percentile(values, 0.95):7.2f} ms  ({len(values)} calls)"
        )


if __name__ == "__main__":
    main()
