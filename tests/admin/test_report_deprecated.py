"""`ticket-server report deprecated`: who still calls which retiring tool, how often, when last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date

from fastmcp import Client

from ticket_server.server import build_server
from ticket_server.settings import Settings


def report(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    env["TICKET_SERVER_DATABASE_URL"] = settings.database_url
    return subprocess.run(
        [sys.executable, "-m", "ticket_server", "report", "deprecated", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


async def test_report_counts_deprecated_calls_per_caller(settings: Settings, add_caller) -> None:
    await add_caller("billing-bot")
    calls = [("local", "get_ticket_status", {"ticket_id": "SUP-4412"})] * 3 + [
        ("local", "search_tickets", {"query": "refund"}),
        ("billing-bot", "get_ticket_status", {"ticket_id": "SUP-4412"}),
        ("local", "get_ticket_status_v2", {"ticket_id": "SUP-4412"}),  # current: not reported
    ]
    for caller, tool, arguments in calls:
        overrides = {"stdio_caller": caller} if caller != "local" else {}
        async with Client(build_server(settings.model_copy(update=overrides))) as client:
            await client.call_tool(tool, arguments)
    # After retirement the refusals are counted too: those callers most need telling.
    async with Client(build_server(settings, clock=lambda: date(2027, 3, 1))) as client:
        refused = await client.call_tool(
            "search_tickets", {"query": "refund"}, raise_on_error=False
        )
        assert refused.is_error

    proc = report(settings, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {(r["caller"], r["tool"]): r for r in map(json.loads, proc.stdout.splitlines())}
    assert set(rows) == {
        ("local", "get_ticket_status"),
        ("local", "search_tickets"),
        ("billing-bot", "get_ticket_status"),
    }
    assert rows[("local", "get_ticket_status")]["calls"] == 3
    assert rows[("local", "search_tickets")]["calls"] == 2
    assert rows[("billing-bot", "get_ticket_status")]["replacement"] == "get_ticket_status_v2"
    assert rows[("billing-bot", "get_ticket_status")]["sunset"] == "2027-02-28"
    assert all(r["last_call"] for r in rows.values())

    table = report(settings)
    assert table.returncode == 0
    assert "billing-bot" in table.stdout and "get_ticket_status_v2" in table.stdout
    assert "3 caller/tool pair(s)" in table.stderr
