"""GET /metrics: Prometheus figures off the MCP path, fed by the audit trail."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
from mcp import Client

from tests.transports.conftest import add_caller, start_http_server, stop


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_metrics_count_calls_outcomes_latency_limits_and_deprecations(
    db_path: Path, tmp_path: Path
) -> None:
    token = add_caller(db_path, "billing", tool_rate_limit="3/minute")
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-0000000"})
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
            for _ in range(3):
                await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        response = httpx.get(f"{server.base}/metrics", timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        text = response.text
        calls = "ticket_server_tool_calls_total"
        # get_ticket_status shares get_ticket_status_v2's allowance (3): the last 3 are refused
        assert (
            sample(
                text,
                calls,
                tool="get_ticket_status_v2",
                caller="billing",
                outcome="ok",
                protocol_version="2026-07-28",
            )
            == 1
        )
        assert (
            sample(text, calls, tool="get_ticket_status_v2", caller="billing", outcome="tool_error")
            == 1
        )
        assert (
            sample(
                text, calls, tool="get_ticket_status_v2", caller="billing", outcome="rate_limited"
            )
            == 3
        )
        assert (
            sample(
                text,
                "ticket_server_rate_limit_refusals_total",
                caller="billing",
                tool="get_ticket_status_v2",
            )
            == 3
        )
        assert (
            sample(
                text,
                "ticket_server_deprecated_tool_calls_total",
                caller="billing",
                tool="get_ticket_status",
            )
            == 1
        )
        assert (
            sample(
                text, "ticket_server_tool_call_duration_seconds_count", tool="get_ticket_status_v2"
            )
            == 5
        )
        assert "ticket_server_database_errors_total 0.0" in text
        assert token not in text
    finally:
        stop(server.process)


def test_metrics_token_protects_the_endpoint(db_path: Path, tmp_path: Path) -> None:
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_METRICS_TOKEN="scrape-secret")
    try:
        assert httpx.get(f"{server.base}/metrics", timeout=10).status_code == 403
        wrong = httpx.get(
            f"{server.base}/metrics", headers={"Authorization": "Bearer nope"}, timeout=10
        )
        assert wrong.status_code == 403
        ok = httpx.get(
            f"{server.base}/metrics", headers={"Authorization": "Bearer scrape-secret"}, timeout=10
        )
        assert ok.status_code == 200 and "ticket_server_tool_calls" in ok.text
    finally:
        stop(server.process)
