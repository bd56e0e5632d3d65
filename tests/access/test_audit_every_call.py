"""Issue 16, item 11: every tools/call that reaches the server yields exactly one audit
record, malformed ones included (arguments that are not an object, a name that is not a
string), on a real HTTP server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2 as httpx

from tests.access.conftest import MODERN_META, audit_rows, modern_call
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
            call(
                server,
                token,
                4,
                {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-4412"}},
            ),
            call(server, token, 5, {"name": "no_such_tool", "arguments": {"a": 1}}),
        ]
    finally:
        stop(server.process)  # SIGTERM: the audit queue is flushed
    assert [a.status_code for a in answers] == [400, 400, 400, 200, 400]
    # The HTTP transport refuses malformed calls (-32602) before the SDK reads them and
    # records each; a name that is not a string is recorded under the Mcp-Name header's.
    rows = asyncio.run(audit_rows(Settings(database_url=f"sqlite+aiosqlite:///{db_path}")))
    got = sorted((r.tool, r.outcome, r.detail or "") for r in rows)
    assert got == sorted(
        [
            ("get_ticket_status_v2", "tool_error", "tools/call params.arguments must be an object"),
            ("get_ticket_status_v2", "tool_error", "tools/call params.arguments must be an object"),
            ("x", "tool_error", "tools/call params.name must be a string"),
            ("get_ticket_status_v2", "ok", ""),
            ("no_such_tool", "tool_error", "unknown tool"),
        ]
    ), got
    assert all(r.caller == "sender" and r.transport == "http" for r in rows)


def _read(
    server, token: str, request_id: int, method: str, params: dict, **meta: object
) -> httpx.Response:
    """One 2026-07-28 ``method`` POST built by hand, so that params the SDK refuses can be
    sent."""
    return httpx.post(
        server.url,
        timeout=30,
        json={
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": {**MODERN_META, **meta}},
        },
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
            "Mcp-Name": str(params.get("name") or params.get("uri") or ""),
        },
    )


def test_reads_the_sdk_refuses_each_leave_one_audit_record(db_path: Path, tmp_path: Path) -> None:
    """A prompts/get or resources/read whose params the SDK refuses before the read gate
    sees them (a prompt argument that is not a text, a progress token that is a list) is recorded
    too, as a malformed tools/call is: every read yields one record (README, Audit)."""
    token = add_caller(db_path, "sender")
    server = start_http_server(db_path, tmp_path)
    try:
        answers = [
            _read(
                server,
                token,
                1,
                "prompts/get",
                {"name": "summarize_ticket", "arguments": {"ticket_id": 5}},
            ),
            _read(
                server,
                token,
                2,
                "resources/read",
                {"uri": "tickets://ticket/SUP-4412"},
                progressToken=[1],
            ),
            _read(
                server,
                token,
                3,
                "prompts/get",
                {"name": "summarize_ticket", "arguments": {"ticket_id": "SUP-4412"}},
            ),
        ]
    finally:
        stop(server.process)
    errors = [a.json().get("error", {}).get("code") for a in answers]
    assert errors == [-32602, -32602, None], [a.text for a in answers]
    rows = asyncio.run(audit_rows(Settings(database_url=f"sqlite+aiosqlite:///{db_path}")))
    got = sorted((r.tool, r.outcome, r.detail or "") for r in rows)
    assert got == sorted(
        [
            ("prompts/get summarize_ticket", "tool_error", "malformed request"),
            ("resources/read", "tool_error", "malformed request"),
            ("prompts/get summarize_ticket", "ok", ""),
        ]
    ), got
    assert all(r.caller == "sender" and r.transport == "http" for r in rows)
