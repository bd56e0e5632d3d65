"""Issue 16, items 4 and 10: no name a caller sends buys it anything. Made-up tool names
do not become metric labels (only the server's tools and a fixed `unknown`), and neither
made-up names nor alternating a deprecated name with its replacement gives a caller more
calls than its limit."""

from __future__ import annotations

import json

from fastmcp import Client

from tests.access.conftest import audit_rows
from tests.helpers import call_any, text_of
from ticket_server.server import build_runtime, build_server


async def test_made_up_tool_names_share_one_metric_label(settings, mode: str) -> None:
    runtime = build_runtime(settings)
    async with Client(build_server(runtime), mode=mode) as client:
        await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        before = len(runtime.metrics.render())
        for i in range(200):
            await call_any(client, f"made_up_{i}")
        text = runtime.metrics.render().decode()
    assert "made_up_" not in text
    assert 'tool="unknown"' in text and 'tool="get_ticket_status_v2"' in text
    print(f"\n[{mode}] /metrics: {before} bytes before, {len(text)} after 200 made-up names")
    assert len(text) - before < 4000  # one more label set (unknown), not 200
    for line in text.splitlines():
        if line.startswith("ticket_server_tool_calls_total{"):
            assert 'caller="local"' in line or 'caller="anonymous"' in line
            assert any(
                f'protocol_version="{v}"' in line for v in ("2025-11-25", "2026-07-28", "unknown")
            )


async def test_alternating_a_deprecated_name_with_its_replacement_shares_one_limit(
    server_as,
    add_caller,
    mode: str,
) -> None:
    await add_caller("alternator", tool_rate_limit="5/minute")
    async with Client(server_as(stdio_caller="alternator"), mode=mode) as client:
        answers = [
            await client.call_tool(
                ("get_ticket_status", "get_ticket_status_v2")[i % 2],
                {"ticket_id": "SUP-4412"},
                raise_on_error=False,
            )
            for i in range(10)
        ]
    assert [a.is_error for a in answers] == [False] * 5 + [True] * 5
    assert all("Rate limit reached" in text_of(a) for a in answers[5:])


async def test_calls_to_unknown_names_count_against_one_allowance_and_record_no_arguments(
    server_as,
    add_caller,
    settings,
    mode: str,
) -> None:
    await add_caller("prober", tool_rate_limit="5/minute")
    big = {"payload": "x" * 4000}
    async with Client(server_as(stdio_caller="prober"), mode=mode) as client:
        answers = [await call_any(client, f"nope_{i % 3}", big) for i in range(20)]
        # the caller's real tools keep their own allowance
        assert (await client.call_tool("search_tickets_v2", {"limit": 1})).is_error is False
    assert all(is_error for is_error, _ in answers)
    assert sum("Unknown tool" in text for _, text in answers) == 5
    assert sum("Rate limit reached" in text for _, text in answers) == 15
    rows = [r for r in await audit_rows(settings) if r.tool.startswith("nope_")]
    assert len(rows) == 20
    assert {r.outcome for r in rows} == {"tool_error", "rate_limited"}
    assert all(json.loads(r.arguments) == {"[not recorded]": "1 argument"} for r in rows)
