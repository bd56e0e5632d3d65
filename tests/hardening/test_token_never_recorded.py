"""No bearer token in the audit trail or the logs: after calls of every outcome over
HTTP (both protocol revisions) and stdio, with DEBUG logging, no token (nor its secret
part) is in any column of any audit_events row, nor anywhere on the servers' stderr."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.access.test_access_http import post
from tests.transports.conftest import add_caller, start_http_server, stop
from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio

pytestmark = pytest.mark.sqlite_only


async def test_no_token_in_any_audit_row_or_log_line(db_path: Path, tmp_path: Path) -> None:
    tokens = {
        "reader": add_caller(db_path, "reader", tool_rate_limit="3/minute"),
        "billing": add_caller(db_path, "billing", queues=["billing"]),
        "noscope": add_caller(db_path, "noscope", scopes=("other:read",)),
        "local": add_caller(db_path, "local-ide"),
    }
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_LOG_LEVEL="DEBUG")
    try:
        for mode in ("legacy", "2026-07-28"):
            # Over legacy HTTP a caller whose scopes allow no tool gets no session (403, below).
            for name in (
                ("reader", "billing", "noscope") if mode == "2026-07-28" else ("reader", "billing")
            ):
                async with Client(server.transport(tokens[name]), mode=mode) as client:
                    calls = [
                        (
                            "get_ticket_status_v2",
                            {"ticket_id": "SUP-4412"},
                        ),  # ok, missing, bad, limited
                        ("get_ticket_status_v2", {"ticket_id": "SUP-0000000"}),
                        ("get_ticket_status_v2", {"ticket_id": 5}),
                        ("search_tickets", {"query": "invoice", "limit": 1_000_000_000}),
                    ]
                    for tool, arguments in calls:
                        try:
                            await client.call_tool(tool, arguments)
                        except MCPError:  # a tool this caller may not call: -32602
                            assert name == "noscope"
        tokens["unknown"] = "tks_" + "n0t-a-real-token" * 3
        refused = post(server, tokens["unknown"])
        assert refused.status_code == 401
        assert post(server, tokens["noscope"]).status_code == 403
    finally:
        stop(server.process)
    raw = RawStdio(db_path, TICKET_SERVER_TOKEN=tokens["local"], TICKET_SERVER_LOG_LEVEL="DEBUG")
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        for n, (tool, arguments) in enumerate(
            [
                ("get_ticket_status_v2", {"ticket_id": "SUP-4412"}),
                ("search_tickets_v2", {"query": "x", "limit": -1}),
            ]
        ):
            raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": 10 + n,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                }
            )
            raw.read_until_id(10 + n)
    finally:
        raw.close()  # end of stdin: the audit trail is flushed
        stop(raw.process)
    stdio_logs = raw.stderr()

    with sqlite3.connect(db_path) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(row) for row in conn.execute("SELECT * FROM audit_events")]
    callers = {row["caller"] for row in rows}
    assert {"reader", "billing", "noscope", "local-ide"} <= callers, callers
    assert {row["outcome"] for row in rows} >= {"ok", "tool_error", "denied", "rate_limited"}
    dumped = "\n".join(repr(sorted(row.items())) for row in rows)
    logs = server.logs() + stdio_logs
    assert len(logs.splitlines()) > 50, "DEBUG logs were captured"
    for name, token in tokens.items():
        secret = token.removeprefix("tks_")[:16]
        assert token not in dumped and secret not in dumped, f"{name}'s token in audit_events"
        assert token not in logs and secret not in logs, f"{name}'s token on stderr"
    assert "Bearer " not in logs
