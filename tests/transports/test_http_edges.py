"""The HTTP transport's edges on a real server on 127.0.0.1: what a request without a
token costs (16.1), read deadlines, legacy sessions (16.3), audit records of refused
calls (16.11), no server header (16.14), and the cases C11-C13, C15, C17, C18."""

from __future__ import annotations

import asyncio
import json
import select
import signal
import socket
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.transports.conftest import add_caller, start_http_server, stop

pytestmark = pytest.mark.sqlite_only

LEGACY = "2025-11-25"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def tools_call(request_id: int | str, name: str, arguments: object) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def audit_rows(db_path: Path) -> list[tuple]:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(
            "SELECT caller, tool, outcome, detail FROM audit_events ORDER BY pk"
        ).fetchall()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture
def server(db_path: Path, tmp_path: Path):
    token = add_caller(db_path, "tester")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_HTTP_READ_TIMEOUT="1")
    server.token = token
    try:
        yield server
    finally:
        stop(server.process)


# --- 16.1: an unauthenticated request costs almost nothing ---------------------------


def test_unauthenticated_large_post_gets_401_not_413(server) -> None:
    """A 5 MB POST without a valid token is answered 401 from its headers; a request
    with a valid token and the same declared size gets 413. No answer names the server
    software (16.14)."""
    head = {**ACCEPT, "Content-Length": str(5 * 1024 * 1024)}
    for headers in ({}, bearer("tks_wrong")):
        status, response_headers = _raw_head(server.port, {**head, **headers})
        assert status == 401
        assert "server" not in response_headers
    status, _ = _raw_head(server.port, {**head, **bearer(server.token)})
    assert status == 413
    assert "server" not in httpx.get(f"{server.base}/healthz", timeout=5).headers


def _raw_head(port: int, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    """POST /mcp with ``headers`` and no body bytes at all: the status and headers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed before an answer: {data!r}"
            data += chunk
    status_line, *header_lines = data.split(b"\r\n\r\n")[0].decode().split("\r\n")
    return int(status_line.split()[1]), {
        k.lower(): v for k, v in (line.split(": ", 1) for line in header_lines)
    }


@pytest.mark.slow
def test_100_unauthenticated_connections_sending_bodies_get_401_and_cost_little(server) -> None:
    """16.1: 100 concurrent connections each declare a 4 MiB body and send most of it
    without a token: each is answered 401 as soon as its headers are in, and the
    server's memory stays flat. Prints memory before and after and the bytes sent."""
    size = 4 * 1024 * 1024
    chunk = b"x" * 65536
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {size}\r\n\r\n"
    ).encode()

    def attack(_: int) -> tuple[int, int]:
        sent = 0
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.sendall(head)
            while sent < size - len(chunk) * 2:  # most of the body, never all of it
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break
                try:
                    sock.sendall(chunk)
                except OSError:
                    break
                sent += len(chunk)
            answer = sock.recv(65536)
        return int(answer.split(b" ", 2)[1]), sent

    before = rss_kib(server.process.pid)
    with ThreadPoolExecutor(100) as pool:
        results = list(pool.map(attack, range(100)))
    after = rss_kib(server.process.pid)
    sent = sorted(s for _, s in results)
    print(
        f"\n100 unauthenticated 4 MiB POSTs: server RSS {before // 1024} -> {after // 1024} MiB; "
        f"body bytes sent before the 401: median {sent[50] // 1024} KiB, max {sent[-1] // 1024} KiB"
    )
    assert [status for status, _ in results] == [401] * 100
    assert after - before < 32 * 1024, "memory flat (< 32 MiB growth)"
    assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200


def test_partial_header_line_is_closed_at_the_read_deadline(server) -> None:
    """Slowloris: a connection that never finishes its header lines is closed by the
    server once ``http_read_timeout`` (1 s here) has passed."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        sock.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Slow: aaaa".encode()
        )
        assert sock.recv(1024) == b""  # closed by the server, with no answer


def test_workers_also_close_partial_headers_and_hide_the_server(
    db_path: Path, tmp_path: Path
) -> None:
    """With `--workers 2` each worker process applies the header deadline too, and no
    answer names the server software (16.1, 16.14)."""
    server = start_http_server(
        db_path, tmp_path, "--workers", "2", TICKET_SERVER_HTTP_READ_TIMEOUT="1"
    )
    try:
        assert "server" not in httpx.get(f"{server.base}/healthz", timeout=5).headers
        with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
            sock.sendall(
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Slow: aaaa".encode()
            )
            assert sock.recv(1024) == b""
    finally:
        stop(server.process)


def test_body_not_sent_in_time_gets_408(server, db_path: Path) -> None:
    """A body that stops coming is answered 408 (JSON-RPC error) once the read
    deadline passes, and a tools/call it carried (by its headers) is audited."""
    headers = {
        **ACCEPT,
        **bearer(server.token),
        "Content-Length": "1000",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "search_tickets_v2",
    }
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: 127.0.0.1:{server.port}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + b'{"jsonrpc":')
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 408")
    assert json.loads(body)["error"]["code"] == -32600
    stop(server.process)
    assert audit_rows(db_path) == [
        ("tester", "search_tickets_v2", "tool_error", "request body not sent in time")
    ]


# --- C17, C18: 401 and GET /mcp ------------------------------------------------------


def test_c17_wrong_token_gets_401_that_says_how_to_get_one(server) -> None:
    """C17: a POST with a wrong token gets 401 with WWW-Authenticate; the body says the
    token is unknown or revoked and how an operator makes one; nothing says
    "re-register" (this server has no dynamic client registration)."""
    refused = httpx.post(
        server.url, json=INIT, headers={**ACCEPT, **bearer("tks_wrong")}, timeout=10
    )
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert (
        f'resource_metadata="{server.base}/.well-known/oauth-protected-resource/mcp"' in challenge
    )
    message = refused.json()["error"]["message"]
    assert (
        "unknown or revoked" in message
        and "ticket-server callers add" in message
        and "rotate" in message
    )
    missing = httpx.post(server.url, json=INIT, headers=ACCEPT, timeout=10)
    assert missing.status_code == 401 and "error=" not in missing.headers["www-authenticate"]
    assert "ticket-server callers add" in missing.json()["error"]["message"]
    for response in (refused, missing):
        assert (
            "register" not in response.text.lower()
            and "register" not in response.headers["www-authenticate"]
        )
        assert "retry-after" not in response.headers


async def test_c17_readme_client_with_a_wrong_token_names_the_401(server) -> None:
    """C17: the README's Python snippet (fastmcp Client, ``auth=TOKEN``) with a wrong
    token ends in an error whose message names the 401."""
    from fastmcp import Client as FastMCPClient

    with pytest.raises(Exception) as failed:
        async with FastMCPClient(server.url, auth="tks_wrong") as client:
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
    chain, exc = [], failed.value
    while exc is not None:
        chain.extend(str(e) for e in getattr(exc, "exceptions", [exc]))
        exc = exc.__cause__ or exc.__context__
    assert any("401" in text for text in chain), chain


def test_c18_get_without_a_session_opens_none(server) -> None:
    """C18: legacy GET /mcp with a valid token and no session id is an error without
    Retry-After and without a new Mcp-Session-Id, and the server opens no session."""
    for _ in range(3):
        response = httpx.get(
            server.url, headers={"Accept": "text/event-stream", **bearer(server.token)}, timeout=10
        )
        assert 400 <= response.status_code < 500
        assert "retry-after" not in response.headers and "mcp-session-id" not in response.headers
        assert "Mcp-Session-Id" in response.json()["error"]["message"]
    assert "Created new transport" not in server.logs()


# --- C11: a standalone SSE stream ----------------------------------------------------


def test_c11_sse_stream_starts_at_once_and_ends_cleanly_on_sigterm(server) -> None:
    """C11: after initialize, GET /mcp (text/event-stream, the session id) gets its
    response headers at once, not with the first keep-alive (15 s); SIGTERM while it is
    open ends it cleanly: exit status 0, no 500, no "ASGI callable returned without
    starting response"."""
    headers = {**ACCEPT, **bearer(server.token)}
    init = httpx.post(server.url, json=INIT, headers=headers, timeout=10)
    session = {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    httpx.post(
        server.url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**headers, **session},
        timeout=10,
    )
    # The read timeout bounds the wait for the response head well below the keep-alive.
    with httpx.stream(
        "GET",
        server.url,
        headers={"Accept": "text/event-stream", **bearer(server.token), **session},
        timeout=httpx.Timeout(5, read=30),
    ) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        server.process.send_signal(signal.SIGTERM)
        for _ in stream.iter_bytes():
            pass
    assert server.process.wait(timeout=30) == 0
    logs = server.logs()
    assert "ASGI callable returned without" not in logs and '"status": 500' not in logs
    assert "Traceback" not in logs


# --- C12: browser clients --------------------------------------------------------------


def test_c12_cors_for_the_inspector_and_listed_origins(db_path: Path, tmp_path: Path) -> None:
    """C12: a preflight from the MCP Inspector's web UI (and from an origin listed in
    settings) is answered with that origin and the headers it asked for; the POST's
    answer allows that origin and exposes Mcp-Session-Id and the protocol headers; a
    foreign origin is still refused."""
    token = add_caller(db_path, "browser")
    server = start_http_server(
        db_path, tmp_path, TICKET_SERVER_ALLOWED_ORIGINS='["https://app.example"]'
    )
    asked = "authorization, content-type, mcp-protocol-version, mcp-session-id"
    try:
        for origin in ("http://localhost:6274", "https://app.example"):
            preflight = httpx.options(
                server.url,
                timeout=10,
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": asked,
                },
            )
            assert 200 <= preflight.status_code < 300
            assert preflight.headers["access-control-allow-origin"] == origin
            assert "POST" in preflight.headers["access-control-allow-methods"]
            allowed = preflight.headers["access-control-allow-headers"].lower()
            assert all(h in allowed for h in asked.split(", "))
            answer = httpx.post(
                server.url,
                json=INIT,
                headers={**ACCEPT, **bearer(token), "Origin": origin},
                timeout=10,
            )
            assert answer.status_code == 200
            assert answer.headers["access-control-allow-origin"] == origin
            exposed = answer.headers["access-control-expose-headers"].lower()
            assert "mcp-session-id" in exposed and "mcp-protocol-version" in exposed
        evil = "http://evil.example"
        preflight = httpx.options(
            server.url,
            timeout=10,
            headers={
                "Origin": evil,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
            },
        )
        assert preflight.headers.get("access-control-allow-origin") != evil
        answer = httpx.post(
            server.url, json=INIT, headers={**ACCEPT, **bearer(token), "Origin": evil}, timeout=10
        )
        assert answer.status_code == 403 and "access-control-allow-origin" not in answer.headers
    finally:
        stop(server.process)


# --- C13: unknown tools ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_c13_unknown_and_refused_tools_are_the_same_json_rpc_error(
    db_path: Path, tmp_path: Path, mode: str
) -> None:
    """C13: tools/call of `no_such_tool` is JSON-RPC -32602 on both revisions; a real
    tool the caller may not call answers exactly the same apart from the name. (Over
    legacy HTTP a caller without a usable scope gets no session at all, see 16.3; the
    in-memory tests compare the two answers on the legacy revision.)"""
    token = add_caller(db_path, "c13")
    noscope = add_caller(db_path, "c13-noscope", scopes=("other:read",))
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(server.transport(token), mode=mode) as client:
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool", {"query": "x"})
        assert unknown.value.error.code == -32602
        assert unknown.value.error.message == "Unknown tool: 'no_such_tool'"
        if mode == "2026-07-28":
            async with Client(server.transport(noscope), mode=mode) as client:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("search_tickets_v2", {"query": "x"})
            assert refused.value.error.code == -32602
            assert refused.value.error.message == unknown.value.error.message.replace(
                "no_such_tool", "search_tickets_v2"
            )
    finally:
        stop(server.process)


# --- C15: 429 --------------------------------------------------------------------------


def test_c15_429_is_a_json_rpc_error_with_the_id_and_the_wait(
    db_path: Path, tmp_path: Path
) -> None:
    """C15: a caller with `--http-limit 2/minute` sends three POSTs: the third gets 429
    with a JSON-RPC error carrying its request id and the wait in seconds, and
    Retry-After; the 200 answers carry no Retry-After. The refused tools/call is audited."""
    token = add_caller(db_path, "c15", http_rate_limit="2/minute")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_STATELESS_HTTP="true")
    headers = {**ACCEPT, **bearer(token), "MCP-Protocol-Version": LEGACY}
    try:
        answers = [
            httpx.post(
                server.url,
                json=tools_call(f"call-{n}", "get_ticket_status_v2", {"ticket_id": "SUP-4412"}),
                headers=headers,
                timeout=10,
            )
            for n in range(3)
        ]
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert all("retry-after" not in a.headers for a in answers[:2])
        body = answers[2].json()
        wait = int(answers[2].headers["retry-after"])
        assert 1 <= wait <= 60
        assert body["jsonrpc"] == "2.0" and body["id"] == "call-2"
        assert (
            body["error"]["data"] == {"retry_after_seconds": wait}
            and f"retry in {wait} seconds" in body["error"]["message"]
        )
        assert (
            answers[2].headers["x-ratelimit-limit"] == "2"
            and answers[2].headers["x-ratelimit-remaining"] == "0"
        )
    finally:
        stop(server.process)
    assert audit_rows(db_path)[-1] == (
        "c15",
        "get_ticket_status_v2",
        "rate_limited",
        "HTTP request limit reached",
    )


# --- 16.11: refused tools/calls are audited ----------------------------------------------


def test_tools_calls_refused_by_http_leave_audit_records(db_path: Path, tmp_path: Path) -> None:
    """16.11: a tools/call refused at the HTTP layer (401, 413) or malformed (arguments
    not an object, a name that is not a string: 400 with -32602 and the request id)
    leaves one audit record each; the server never ran them."""
    token = add_caller(db_path, "auditor")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_MAX_REQUEST_BYTES="4096",
        TICKET_SERVER_STATELESS_HTTP="true",
    )
    modern = {
        **ACCEPT,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "search_tickets_v2",
    }
    legacy = {**ACCEPT, **bearer(token), "MCP-Protocol-Version": LEGACY}
    try:
        call = tools_call(1, "search_tickets_v2", {"query": "x"})
        assert httpx.post(server.url, json=call, headers=modern, timeout=10).status_code == 401
        big = tools_call(2, "search_tickets_v2", {"query": "x" * 8000})
        assert (
            httpx.post(
                server.url, json=big, headers={**modern, **bearer(token)}, timeout=10
            ).status_code
            == 413
        )
        for n, (name, arguments) in enumerate([("search_tickets_v2", [1, 2]), (42, {})], start=3):
            answer = httpx.post(
                server.url, json=tools_call(n, name, arguments), headers=legacy, timeout=10
            )  # type: ignore[arg-type]
            assert answer.status_code == 400
            assert answer.json()["id"] == n and answer.json()["error"]["code"] == -32602
    finally:
        stop(server.process)
    assert audit_rows(db_path) == [
        (None, "search_tickets_v2", "denied", "no valid bearer token"),
        ("auditor", "search_tickets_v2", "tool_error", "request body too large"),
        (
            "auditor",
            "search_tickets_v2",
            "tool_error",
            "tools/call params.arguments must be an object",
        ),
        ("auditor", "unknown", "tool_error", "tools/call params.name must be a string"),
    ]


# --- 16.3: legacy sessions --------------------------------------------------------------


def test_sessions_per_caller_and_none_for_callers_without_a_usable_scope(
    db_path: Path, tmp_path: Path
) -> None:
    """16.3: a caller holds at most `sessions_per_caller` legacy sessions (then 429, a
    JSON-RPC error); closing one frees its place; another caller is not affected; a
    caller whose scopes allow no tool is refused a session (403) and opens none."""
    greedy = add_caller(db_path, "greedy")
    other = add_caller(db_path, "other")
    noscope = add_caller(db_path, "noscope", scopes=("other:read",))
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_SESSIONS_PER_CALLER="2")

    def initialize(token: str) -> httpx.Response:
        return httpx.post(server.url, json=INIT, headers={**ACCEPT, **bearer(token)}, timeout=10)

    try:
        first, second, third = (initialize(greedy) for _ in range(3))
        assert first.status_code == second.status_code == 200
        assert third.status_code == 429 and "mcp-session-id" not in third.headers
        assert (
            third.json()["id"] == 1 and "Too many open sessions" in third.json()["error"]["message"]
        )
        assert initialize(other).status_code == 200
        closed = httpx.delete(
            server.url,
            timeout=10,
            headers={
                **bearer(greedy),
                "Mcp-Session-Id": first.headers["mcp-session-id"],
                "MCP-Protocol-Version": LEGACY,
            },
        )
        assert closed.status_code == 200
        assert initialize(greedy).status_code == 200
        refused = initialize(noscope)
        assert refused.status_code == 403 and "mcp-session-id" not in refused.headers
        assert "ticket-server callers" in refused.json()["error"]["message"]
    finally:
        stop(server.process)
    assert server.logs().count("Created new transport") == 4


def test_concurrent_initializes_do_not_pass_the_session_quota(
    db_path: Path, tmp_path: Path
) -> None:
    """16.3 under concurrency: initializes sent at once all passed the quota check before
    any of their sessions was counted (40 of 40 opened with a quota of 8, a review's
    finding), so one caller could hold any number of sessions, up to the SDK's cap for
    every caller together. A session being opened now holds its place."""
    greedy = add_caller(db_path, "greedy")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_SESSIONS_PER_CALLER="2")

    headers = {**ACCEPT, **bearer(greedy)}

    async def at_once(n: int) -> list[int]:
        limits = httpx.Limits(max_connections=n)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            sent = [client.post(server.url, json=INIT, headers=headers) for _ in range(n)]
            return [answer.status_code for answer in await asyncio.gather(*sent)]

    try:
        answers = asyncio.run(at_once(16))
        assert answers.count(200) == 2 and answers.count(429) == 14, answers
        assert httpx.post(server.url, json=INIT, headers=headers, timeout=10).status_code == 429
    finally:
        stop(server.process)
    assert server.logs().count("Created new transport") == 2


def test_c17_text_log_format_keeps_every_field(db_path: Path, tmp_path: Path) -> None:
    """C17: with LOG_FORMAT=text each line still carries every field the JSON line
    has (the serving URL and version, the audit record of a refused tools/call)."""
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_LOG_FORMAT="text")
    try:
        headers = {
            **ACCEPT,
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "search_tickets_v2",
        }
        assert (
            httpx.post(
                server.url, json=tools_call(1, "search_tickets_v2", {}), headers=headers, timeout=10
            ).status_code
            == 401
        )
    finally:
        stop(server.process)
    lines = server.logs().splitlines()
    serving = next(line for line in lines if "serving MCP over Streamable HTTP" in line)
    assert f'url="http://127.0.0.1:{server.port}/mcp"' in serving and "version=" in serving
    audit = next(line for line in lines if line.split(": ", 1)[-1].startswith("tools/call audit="))
    record = json.loads(audit.split("audit=", 1)[1])
    assert record["tool"] == "search_tickets_v2" and record["outcome"] == "denied"
    assert record["detail"] == "no valid bearer token" and record["transport"] == "http"


def test_idle_sessions_expire_and_free_their_place(db_path: Path, tmp_path: Path) -> None:
    """16.3: with `session_idle_timeout` = 1 s and one session per caller, an idle session
    is closed by the server (its id then answers 404) and its place is free again. The
    loop waits for the server's log line within a generous bound; nothing is timed."""
    import time

    token = add_caller(db_path, "idler")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_SESSIONS_PER_CALLER="1",
        TICKET_SERVER_SESSION_IDLE_TIMEOUT="1",
    )
    headers = {**ACCEPT, **bearer(token)}
    try:
        first = httpx.post(server.url, json=INIT, headers=headers, timeout=10)
        assert first.status_code == 200
        sid = first.headers["mcp-session-id"]
        deadline = time.monotonic() + 30
        while f"Session {sid} idle timeout" not in server.logs():  # the SDK's own log line
            assert time.monotonic() < deadline, "the idle session was never closed"
            time.sleep(0.2)
        assert httpx.post(server.url, json=INIT, headers=headers, timeout=10).status_code == 200
        old = httpx.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            timeout=10,
            headers={**headers, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY},
        )
        assert old.status_code == 404
    finally:
        stop(server.process)


def test_port_0_logs_the_port_the_system_chose(db_path: Path, tmp_path: Path) -> None:
    """`--port 0` lets the system choose a free port; the "serving" line names that
    port (not 0), and the server answers there."""
    import re
    import subprocess
    import time

    from tests.transports.conftest import TICKET_SERVER, server_env

    stderr = tmp_path / "port0.stderr"
    process = subprocess.Popen(
        [*TICKET_SERVER, "serve", "--transport", "http", "--port", "0"],
        env=server_env(db_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("wb"),
    )
    try:
        deadline, found = time.monotonic() + 30, None
        while found is None and time.monotonic() < deadline and process.poll() is None:
            found = re.search(r"serving MCP over Streamable HTTP on http://127\.0\.0\.1:(\d+)/mcp",
                              stderr.read_text())  # fmt: skip
            time.sleep(0.1)
        assert found is not None, stderr.read_text()
        port = int(found.group(1))
        assert port != 0
        while time.monotonic() < deadline:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert answer.status_code == 200
    finally:
        stop(process)
