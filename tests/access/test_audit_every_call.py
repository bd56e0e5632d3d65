"""Issue 16, item 11 (the pipeline's half): every tools/call that reaches the server
yields exactly one audit record, malformed ones included (arguments that are not an
object), on a real HTTP server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2 as httpx

from tests.access.conftest import audit_rows, modern_call
from tests.transports.conftest import add_caller, start_http_server, stop
from ticket_server.settings import Settings

def call(server, token: str, request_id: int, params: dict) -> httpx.Response:
    return modern_call(httpx, server.url, token, request_id, params)


def test_malformed_calls_each_leave_one_audit_record(db_path: Path, tmp_path: Path) -> None:
    token = add_caller(db_path, "sender")
    server = start_http_server(db_path, tmp_path)
    try:
        answers = [
            call(server, token, 1, {"name": "get_ticket_status_v2", "arguments": ["SUP-4412"]}),
            call(server, token, 2, {"name": 5, "arguments": {}}),
            call(server, token, 3, {"name": "get_ticket_status_v2", "arguments": "SUP-4412"}),
            call(server, token, 4, {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-4412"}}),
            call(server, token, 5, {"name": "no_such_tool", "arguments": {"a": 1}}),
        ]
    finally:
        stop(server.process)  # SIGTERM: the audit queue is flushed
    assert answers[3].status_code == 200
    # A name that is not a string never reaches the server's middleware on this path:
    # the SDK's HTTP transport refuses it (its Mcp-Name header cannot match). Recording
    # that one is the HTTP layer's part, with its 401/413/429 records.
    assert answers[1].status_code == 400
    rows = asyncio.run(audit_rows(Settings(database_url=f"sqlite+aiosqlite:///{db_path}")))
    got = sorted((r.tool, r.outcome, r.detail or "") for r in rows)
    assert got == sorted([
        ("get_ticket_status_v2", "tool_error", "malformed request"),
        ("get_ticket_status_v2", "tool_error", "malformed request"),
        ("get_ticket_status_v2", "ok", ""),
        ("no_such_tool", "tool_error", "unknown tool"),
    ]), got
    assert all(r.caller == "sender" and r.transport == "http" for r in rows)
