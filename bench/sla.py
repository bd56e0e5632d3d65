"""Issue 34's reads beside `get_ticket_status_v2`, same server, same run, alternating:
`count_tickets` grouped by queue x status (open tickets, with breach counts), the
`tickets://queue/billing` overview (its "breaching within 2 hours" list), and `get_ticket`
with only `sla`; latency p50/p95 per call over the in-memory client, all middleware on,
on SQLite or PostgreSQL, with an SLA policy loaded (every queue has targets, so every
open ticket's SLA state is derived).

    .venv/bin/python -m bench.sla --count 10000 [--calls 200] [--engine postgresql]

Not part of `make bench` (yet): its figures go to ANALYSIS.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
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
            "holiday_calendar": "DE-BE",
            "plans": {"Enterprise": {"urgent": {"first_response": 15, "resolution": 120}}},
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

    from ticket_server.access.callers import open_store
    from ticket_server.db import open_repository
    from ticket_server.server import build_server
    from ticket_server.settings import Settings
    from ticket_server.tickets.sla import Policy
    from ticket_server.tickets.sla_store import refresh, replace_policy
    from ticket_server.tools.toolsets import TOOLSETS

    settings = Settings(
        database_url=url,
        tool_rate_limit="1000000/second",
        write_rate_limit="1000000/second",
        tool_timeout=60,
        database_timeout=600,  # loading the policy derives every ticket's SLA columns
    )
    repo = open_repository(settings)
    policy = Policy.model_validate(POLICY).check()
    await repo.transaction(lambda conn: replace_policy(conn, policy))
    await repo.analyze_tickets()  # as `sla load` does after the rewrite
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

    async def breached(client: Client) -> Any:
        return await client.call_tool(
            "search_tickets_v2", {"breached": True, "status": ["open"], "queue": "billing"}
        )

    soon = (datetime.now(UTC) + timedelta(hours=2)).isoformat()

    async def due_soon(client: Client) -> Any:
        return await client.call_tool("search_tickets_v2", {"due_before": soon})

    async def due_first(client: Client) -> Any:
        return await client.call_tool(
            "search_tickets_v2", {"sort": "due", "status": ["open"], "queue": "billing"}
        )

    targets = await _open_tickets(url, 50)
    turn = {"n": 0}

    async def status_change(client: Client) -> Any:
        # in_progress and back on one of 50 open tickets: a status change with its
        # history row, audit row and SLA bookkeeping (sla_store.refresh).
        n = turn["n"]
        turn["n"] = n + 1
        status = "in_progress" if (n // len(targets)) % 2 == 0 else "open"
        return await client.call_tool(
            "set_ticket_status", {"ticket_id": targets[n % len(targets)], "status": status}
        )

    repo = open_repository(settings)

    async def bookkeeping(_: Client) -> Any:
        # The SLA bookkeeping alone, as a status change does it: one ticket derived
        # and its columns written, in a transaction of its own.
        ticket = targets[turn["n"] % len(targets)]
        return await repo.transaction(lambda conn: refresh(conn, [ticket]))

    work = {
        "get_ticket_status_v2": status,
        "count_tickets queue x status": counts,
        "queue overview (breaching soon)": overview,
        "get_ticket fields=[sla]": sla,
        "search breached=true (open, billing)": breached,
        "search due_before now+2h": due_soon,
        "search sort=due (open, billing)": due_first,
        "set_ticket_status (with SLA upkeep)": status_change,
        "SLA upkeep alone (refresh 1)": bookkeeping,
    }
    out: dict[str, list[float]] = {name: [] for name in work}
    writer = settings.model_copy(
        update={"stdio_caller": "bench-agent", "confirm_writes": [], "toolsets": list(TOOLSETS)}
    )
    store = open_store(settings)
    await store.add("bench-agent", ["tickets:read", "tickets:write"])
    await store.aclose()
    async with Client(build_server(writer)) as client:
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
    await repo.aclose()
    return out


async def _open_tickets(url: str, n: int) -> list[str]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT id FROM tickets WHERE status = 'open' ORDER BY id LIMIT :n"), {"n": n}
            )
            return [r[0] for r in rows]
    finally:
        await engine.dispose()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.sla")
    p.add_argument("--count", type=int, default=10_000, help="tickets in the data set")
    p.add_argument("--calls", type=int, default=200, help="calls per read")
    p.add_argument("--engine", choices=["sqlite", "postgresql"], default="sqlite")
    args = p.parse_args()
    log(f"sla: {args.engine} {args.count:,} tickets ...")
    if args.engine == "postgresql":
        from bench.common import Postgres

        pg = Postgres()
        pg.start()
        try:
            times = asyncio.run(_measure(pg.copy(args.count, "bench_sla"), args.calls))
        finally:
            pg.stop()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            url = sqlite_url(sqlite_copy(args.count, Path(tmp) / "tickets.db"))
            times = asyncio.run(_measure(url, args.calls))
    for name, t in times.items():
        log(
            f"  {name:34s} p50 {percentile(t, 0.5):8.2f} ms, p95 {percentile(t, 0.95):8.2f} ms "
            f"over {len(t):,} calls"
        )
    upkeep = percentile(times["SLA upkeep alone (refresh 1)"], 0.95)
    change = percentile(times["set_ticket_status (with SLA upkeep)"], 0.95)
    log(
        f"  status change p95 with / without SLA upkeep (its p95 taken off): "
        f"{change / max(change - upkeep, 1e-9):.2f}x"
    )
    log(f"  load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
