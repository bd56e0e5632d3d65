"""Access over the real stdio transport: the caller named at start-up, the same rules
as HTTP, and the audit trail flushed at end of stdin and on SIGTERM."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.access.conftest import support_and_billing_ids
from tests.helpers import text_of
from tests.transports.conftest import TICKET_SERVER, add_caller, server_env
from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio, stdio_params
from ticket_server.access.ratelimit import META_KEY


@pytest.mark.parametrize("case", ["bad token", "revoked token", "unknown caller"])
def test_serve_refuses_an_unusable_identity(db_path: Path, case: str) -> None:
    token = add_caller(db_path, "gone")
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE callers SET revoked_at = '2026-11-30 00:00:00' WHERE name = 'gone'")
    env = {
        "bad token": {"TICKET_SERVER_TOKEN": "tks_wrong"},
        "revoked token": {"TICKET_SERVER_TOKEN": token},
        "unknown caller": {"TICKET_SERVER_STDIO_CALLER": "nobody"},
    }[case]
    proc = subprocess.run(
        [*TICKET_SERVER, "serve"],
        env=server_env(db_path, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == b""
    err = proc.stderr.decode().strip().splitlines()[-1]
    assert ("TICKET_SERVER_TOKEN" if "token" in case else "TICKET_SERVER_STDIO_CALLER") in err
    assert token not in proc.stderr.decode()


@pytest.mark.parametrize("via", ["token", "name"])
async def test_billing_caller_over_stdio(db_path: Path, via: str) -> None:
    token = add_caller(db_path, "billing", queues=["billing"], tool_rate_limit="2/minute")
    env = (
        {"TICKET_SERVER_TOKEN": token}
        if via == "token"
        else {"TICKET_SERVER_STDIO_CALLER": "billing"}
    )
    support, billing = support_and_billing_ids(db_path)
    async with Client(stdio_params(db_path, **env)) as client:
        assert (
            await client.call_tool("get_ticket_status", {"ticket_id": billing})
        ).is_error is False
        hidden = await client.call_tool("get_ticket_status", {"ticket_id": support})
        assert hidden.is_error and f"No ticket with id {support!r}" in text_of(hidden)
        page = await client.call_tool("search_tickets_v2", {"limit": 50})
        assert {t["queue"] for t in page.structured_content["tickets"]} == {"billing"}
        refused = await client.call_tool("get_ticket_status", {"ticket_id": billing})
        assert refused.is_error and "Rate limit reached" in text_of(refused)
        assert refused.meta[META_KEY]["retry_after_seconds"] >= 1


async def test_caller_without_scope_over_stdio(db_path: Path) -> None:
    add_caller(db_path, "noscope", scopes=("other:read",))
    async with Client(stdio_params(db_path, TICKET_SERVER_STDIO_CALLER="noscope")) as client:
        assert (await client.list_tools()).tools == []
        with pytest.raises(MCPError) as denied:
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert (
            denied.value.error.code == -32602
            and denied.value.error.message == "Unknown tool: 'get_ticket_status'"
        )


def _calls(raw: RawStdio, n: int) -> None:
    raw.send(INIT)
    raw.read_until_id(1)
    raw.send(INITIALIZED)
    for i in range(n):
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 10 + i,
                "method": "tools/call",
                "params": {"name": "get_ticket_status", "arguments": {"ticket_id": "SUP-4412"}},
            }
        )
        raw.read_until_id(10 + i)


def _audited(db_path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(
            "SELECT caller, transport, outcome FROM audit_events ORDER BY pk"
        ).fetchall()


@pytest.mark.parametrize("ending", ["end of stdin", "SIGTERM"])
def test_audit_is_flushed_on_shutdown(db_path: Path, ending: str) -> None:
    # A long flush interval: only the shutdown can have written these rows.
    raw = RawStdio(db_path, TICKET_SERVER_AUDIT_FLUSH_SECONDS="3600")
    _calls(raw, 3)
    if ending == "SIGTERM":
        raw.process.send_signal(signal.SIGTERM)
        raw.process.wait(timeout=20)
        raw.process.stdin.close()
    else:
        raw.close()
    assert raw.process.returncode == 0, raw.stderr()
    assert _audited(db_path) == [("local", "stdio", "ok")] * 3
    assert raw.stderr().count('"logger": "ticket_server.audit"') == 3
