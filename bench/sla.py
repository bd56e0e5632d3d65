"""Issue 34's reads beside `get_ticket_status_v2`, same server, same run, alternating:
`count_tickets` grouped by queue x status (open tickets, with breach counts), the
`tickets://queue/billing` overview (its "breaching within 2 hours" list), and `get_ticket`
with only `sla`; latency p50/p95 per call over the in-memory client, all middleware on,
on SQLite, with an SLA policy loaded (every queue has targets, so every open ticket's
SLA state is derived).

    .venv/bin/python -m bench.sla --count 10000 [--calls 200]

Not part of `make bench` (yet): its figures go to ANALYSIS.md by hand.
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
POLICY = {
    "queues": {
        "billing": {
            "time_zone": "Europe/Berlin",
            "hours": {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")},
            "holidays": ["2026-12-25"],
            "targets": {
                p: {"first_response": 60 * (i + 1), "resolution": 480 * (i + 1)}
                for i, p in enumerate(("urgent", "high", "normal", "low"))
            },
        },
        "*": {
            "targets": {
                p: {"first_response": 120, "resolution": 960}
                for p in ("urgent", "high", "normal", "low")
            }
        },
    }
}


async def _measure(url: str, calls: int) -> dict[str, list[float]]:
    from fastmcp import Client

    from ticket_server.db import open_repository
    from ticket_server.server import build_server
    from ticket_server.settings import Settings
    from ticket_server.tickets.sla import Policy
    from ticket_server.tickets.sla_store import replace_policy

    settings = Settings(database_url=url, tool_rate_limit="1000000/second", tool_timeout=60)
    repo = open_repository(settings)
    policy = Policy.model_validate(POLICY).check()
    await repo.transaction(lambda conn: replace_policy(conn, policy))
    await repo.aclose()

    async def status(client: Client) -> Any:
        return await client.call_tool("get_ticket_status_v2", {"ticket_id": TICKET})

    async def counts(client: Client) -> Any:
        result = await client.call_tool("count_tickets", {"group_by": ["queue", "status"]})
        return result.structured_content["sla_note"]

    async def overview(client: Client) -> Any:
        return await client.read_resource("tickets://queue/billing")

    async def sla(client: Client) -> Any:
        return await client.call_tool("get_ticket", {"ticket_id": TICKET, "fields": ["sla"]})

    work = {
        "get_ticket_status_v2": status,
        "count_tickets queue x status": counts,
        "queue overview (breaching soon)": overview,
        "get_ticket fields=[sla]": sla,
    }
    out: dict[str, list[float]] = {name: [] for name in work}
    async with Client(build_server(settings)) as client:
        note = await counts(client)
        if note:
            log(f"  count_tickets: {note}")
        for fn in work.values():  # warm-up
            for _ in range(5):
                await fn(client)
        for _ in range(calls):
            for name, fn in work.items():  # alternate, so all see the same machine load
                t = time.perf_counter()
                await fn(client)
                out[name].append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.sla")
    p.add_argument("--count", type=int, default=10_000, help="tickets in the data set")
    p.add_argument("--calls", type=int, default=200, help="calls per read")
    args = p.parse_args()
    log(f"sla: sqlite {args.count:,} tickets ...")
    with tempfile.TemporaryDirectory() as tmp:
        url = sqlite_url(sqlite_copy(args.count, Path(tmp) / "tickets.db"))
        times = asyncio.run(_measure(url, args.calls))
    for name, t in times.items():
        log(
            f"  {name:34s} p50 {percentile(t, 0.5):8.2f} ms, p95 {percentile(t, 0.95):8.2f} ms "
            f"over {len(t):,} calls"
        )
    log(f"  load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
