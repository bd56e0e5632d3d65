"""A caller meets its limit and recovers, over the real transports: stdio (with the audit
outcomes it records, and stdout checked frame by frame under the 2026-07-28 revision)
and HTTP (tool limit and HTTP request limit). The wait before the recovery is the one
the server names (retry_after_seconds, Retry-After): the limit's own window, not a
guess about the machine."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.access.test_access_http import post
from tests.helpers import text_of
from tests.transports.conftest import TICKET_SERVER, add_caller, server_env, start_http_server, stop
from ticket_server.access.ratelimit import META_KEY

WINDOW = "3 per 5 seconds"
STATUS = ("get_ticket_status_v2", {"ticket_id": "SUP-4412"})


def audited(database_url: str, caller: str) -> list[dict]:
    done = subprocess.run(
        [*TICKET_SERVER, "audit", "--caller", caller, "--json"],
        env=server_env(database_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return sorted(map(json.loads, done.stdout.splitlines()), key=lambda r: r["time"])


async def test_stdio_limit_and_recovery_audit_outcomes_and_pure_stdout(
    database_url: str, tmp_path: Path
) -> None:
    """Over stdio, 2026-07-28 revision, both engines (the audit trail is written to each):
    an unknown ticket (tool_error), two answers, a refusal with a retry time
    (rate_limited), and after that time an answer again. The audit trail holds exactly
    those outcomes in order, for transport stdio and revision 2026-07-28; every line
    the server wrote to stdout is a JSON-RPC 2.0 message."""
    add_caller(database_url, "metered", tool_rate_limit=WINDOW)
    stdout_copy = tmp_path / "stdout"
    serve = " ".join(shlex.quote(part) for part in [*TICKET_SERVER, "serve"])
    params = StdioServerParameters(  # the client reads stdout through tee, which keeps a copy
        command="bash",
        args=["-c", f"set -o pipefail; {serve} | tee {shlex.quote(str(stdout_copy))}"],
        env=server_env(
            database_url, TICKET_SERVER_STDIO_CALLER="metered", TICKET_SERVER_LOG_LEVEL="DEBUG"
        ),
    )
    async with Client(params, mode="2026-07-28") as client:
        missing = await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-0000000"})
        assert missing.is_error and "SUP-0000000" in text_of(missing)
        answered = [await client.call_tool(*STATUS) for _ in range(2)]
        assert [r.is_error for r in answered] == [False, False]
        refused = await client.call_tool(*STATUS)
        assert refused.is_error and "Rate limit reached" in text_of(refused)
        retry = refused.meta[META_KEY]["retry_after_seconds"]
        assert 1 <= retry <= 5
        await asyncio.sleep(retry)  # the window the server named
        recovered = await client.call_tool(*STATUS)
        assert recovered.is_error is False, text_of(recovered)
    lines = [line for line in stdout_copy.read_text().splitlines() if line.strip()]
    assert len(lines) >= 6  # the answers to 5 calls, and the discovery before them
    assert all(json.loads(line).get("jsonrpc") == "2.0" for line in lines), lines
    rows = audited(database_url, "metered")
    assert [r["outcome"] for r in rows] == ["tool_error", "ok", "ok", "rate_limited", "ok"], rows
    assert {(r["transport"], r["protocol_version"]) for r in rows} == {("stdio", "2026-07-28")}, (
        rows
    )


async def test_http_limits_and_recovery(db_path: Path, tmp_path: Path) -> None:
    """Over HTTP: the tool limit refuses the 4th call of the window with a retry time and
    answers again after it; the HTTP request limit answers 429 with Retry-After and 200
    again after it. (SQLite: the limits are counted outside the database.)"""
    token = add_caller(db_path, "metered", tool_rate_limit=WINDOW)
    flooder = add_caller(db_path, "flooder", http_rate_limit=WINDOW)
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_STATELESS_HTTP="true")
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            results = [await client.call_tool(*STATUS) for _ in range(4)]
            assert [r.is_error for r in results] == [False, False, False, True]
            retry = results[-1].meta[META_KEY]["retry_after_seconds"]
            await asyncio.sleep(retry)
            assert (await client.call_tool(*STATUS)).is_error is False

        codes = [post(server, flooder) for _ in range(4)]
        assert [c.status_code for c in codes] == [200, 200, 200, 429]
        time.sleep(int(codes[-1].headers["Retry-After"]))
        assert post(server, flooder).status_code == 200
    finally:
        stop(server.process)
