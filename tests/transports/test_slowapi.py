"""What slowapi's ASGI middleware does to the C11 stream: why the HTTP limit is counted
with `limits` directly (README, "Why `limits` and not slowapi").

The design card names slowapi for rate limits. slowapi 0.1.10's ``SlowAPIASGIMiddleware``
keeps a response's ``http.response.start`` back until its first ``http.response.body``,
and sends it again before every later body message. A streamed response (the legacy
revision's standalone ``GET /mcp`` SSE stream) therefore gets its headers only with its
first keep-alive, and its next message fails in uvicorn. The test below asserts that
behaviour; it fails the day slowapi streams properly, and then the team can move the HTTP
limit to slowapi as the card says (keeping C11: tests/transports/test_http_edges.py)."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.transports.conftest import HttpServer, add_caller, free_port, server_env, stop

pytestmark = pytest.mark.sqlite_only

LEGACY = "2025-11-25"
SERVED = [sys.executable, "-m", "tests.transports.slowapi_served"]
PING_SECONDS = 3  # the SSE keep-alive interval in the served process (15 s by default)
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


def start_with_slowapi(db_path: Path, tmp_path: Path) -> HttpServer:
    """`ticket-server serve --transport http` with slowapi in front (slowapi_served.py)."""
    port = free_port()
    stderr = tmp_path / "slowapi.stderr"
    process = subprocess.Popen(
        [*SERVED, "serve", "--transport", "http", "--port", str(port)],
        env=server_env(db_path, SSE_PING_SECONDS=str(PING_SECONDS)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("wb"),
    )
    server = HttpServer(process, port, stderr)
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, f"server exited {process.returncode}: {server.logs()}"
        try:
            if httpx.get(f"{server.base}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            stop(process)
            raise AssertionError(f"server did not come up: {server.logs()}")
        time.sleep(0.1)


def receive(sock: socket.socket, until: float) -> tuple[bytes, float]:
    """What ``sock`` sends before the monotonic time ``until`` (b"" if nothing), and when
    its first bytes came."""
    ready, _, _ = select.select([sock], [], [], max(0.0, until - time.monotonic()))
    return (sock.recv(65536), time.monotonic()) if ready else (b"", until)


def test_c11_slowapi_asgi_middleware_holds_the_stream_start_back(
    db_path: Path, tmp_path: Path
) -> None:
    """C11 with slowapi 0.1.10's ``SlowAPIASGIMiddleware`` in front of our HTTP app, set
    up as a switch to slowapi would set it up (tests/transports/slowapi_served.py): it
    counts (``X-RateLimit-*`` on the initialize answer), but the legacy ``GET /mcp`` SSE
    stream's headers do not arrive at once as C11 asks: they come with the first
    keep-alive, and on SIGTERM the stream's last message makes slowapi send the response
    start a second time, so uvicorn raises and drops the connection without the chunked
    stream's end. This asserts slowapi's behaviour of today: it fails the day slowapi
    passes a streamed response's start through, and then the HTTP limit can move to
    slowapi (README, "Why `limits` and not slowapi")."""
    token = add_caller(db_path, "tester")
    server = start_with_slowapi(db_path, tmp_path)
    try:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        }
        init = httpx.post(server.url, json=INIT, headers=headers, timeout=10)
        assert init.status_code == 200 and init.headers["x-ratelimit-limit"] == "600"
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        httpx.post(server.url, json=initialized, headers={**headers, **session}, timeout=10)

        stream = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        request = {"Accept": "text/event-stream", "Authorization": f"Bearer {token}", **session}
        stream.sendall(
            (
                f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                + "".join(f"{name}: {value}\r\n" for name, value in request.items())
                + "\r\n"
            ).encode()
        )
        sent = time.monotonic()
        # Without slowapi the head arrives at once (test_c11_... in test_http_edges.py).
        early, _ = receive(stream, sent + PING_SECONDS - 1)
        assert early == b"", f"the stream started at once: slowapi streams now? {early!r}"
        head, head_at = receive(stream, sent + 30)
        assert head.startswith(b"HTTP/1.1 200 ") and b"content-type: text/event-stream" in head
        data, ping_at = head, head_at
        while b": ping" not in data and ping_at < head_at + 5:
            more, ping_at = receive(stream, head_at + 5)
            data += more
        assert b": ping" in data and ping_at - head_at < 1, data  # the head came with it
        assert head_at - sent >= PING_SECONDS - 1

        server.process.send_signal(signal.SIGTERM)
        stream.settimeout(20)
        rest = b""
        while chunk := stream.recv(65536):
            rest += chunk
        stream.close()
        assert not rest.endswith(b"0\r\n\r\n"), f"the stream ended cleanly: {rest!r}"
        assert server.process.wait(timeout=30) == 0
        assert "Expected ASGI message 'http.response.body', but got 'http.response.start'" in (
            server.logs()
        )
    finally:
        stop(server.process)
