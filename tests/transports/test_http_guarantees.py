"""HTTP guarantees that a deliberate breakage showed no test held (issue 40), on a real
server on 127.0.0.1: a request without a valid token is answered while its body is
still unsent; the server's own CORS rule, with FastMCP's Host/Origin guard out of the
way. Each test fails with its mutation in bench/mutations/mutations.toml."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.transports.conftest import add_caller, start_http_server, stop
from tests.transports.test_http_edges import ACCEPT, INIT, bearer

pytestmark = pytest.mark.sqlite_only
READ_TIMEOUT = 6.0


def test_401_is_sent_while_the_body_is_still_unsent(db_path: Path, tmp_path: Path) -> None:
    """C23: a POST without a token, or with a wrong one, that declares a 200 KB body and
    sends 1 KB of it, is answered 401 at once: within a third of the body's read
    deadline, while the client still holds the rest of the body, on a connection the
    server then closes."""
    server = start_http_server(
        db_path, tmp_path, TICKET_SERVER_HTTP_READ_TIMEOUT=str(int(READ_TIMEOUT))
    )
    try:
        for authorization in ({}, bearer("tks_wrong")):
            head = "".join(
                f"{k}: {v}\r\n"
                for k, v in {
                    "Host": f"127.0.0.1:{server.port}",
                    **ACCEPT,
                    **authorization,
                    "Content-Length": str(200_000),
                }.items()
            )
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                sock.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + b"{" * 1024)
                started = time.monotonic()
                answer = b""
                while b"\r\n\r\n" not in answer:
                    chunk = sock.recv(65536)
                    assert chunk, f"closed without an answer: {answer!r}"
                    answer += chunk
                waited = time.monotonic() - started
            assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
            assert b"\r\nwww-authenticate: bearer " in answer.lower(), answer[:400]
            assert waited < READ_TIMEOUT / 3, f"401 after {waited:.2f} s: the body was awaited"
    finally:
        stop(server.process)


def test_cors_allows_only_listed_origins_even_where_the_host_guard_lets_a_page_through(
    db_path: Path, tmp_path: Path
) -> None:
    """FastMCP's Host/Origin guard refuses foreign origins before CORS is consulted, so
    C12's refusal of http://evil.example says nothing of the server's own CORS rule.
    Here the guard lets the request through (an origin equal to the request's own host,
    which TICKET_SERVER_ALLOWED_HOSTS lists) and the CORS rule alone decides: an origin
    not in TICKET_SERVER_ALLOWED_ORIGINS and not on loopback gets no preflight and no
    Access-Control-Allow-Origin; a listed one does, on the same host."""
    token = add_caller(db_path, "browser")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_ALLOWED_HOSTS='["tickets.example"]',
        TICKET_SERVER_ALLOWED_ORIGINS='["https://app.example"]',
    )
    preflight_headers = {
        "Host": "tickets.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    try:
        with httpx.Client(timeout=10) as client:
            answers = {}
            for origin in ("https://app.example", "http://tickets.example"):
                post = client.post(
                    server.url,
                    json=INIT,
                    headers={
                        **ACCEPT,
                        **bearer(token),
                        "Host": "tickets.example",
                        "Origin": origin,
                    },
                )
                preflight = client.options(
                    server.url, headers={**preflight_headers, "Origin": origin}
                )
                answers[origin] = post, preflight
        listed_post, listed_preflight = answers["https://app.example"]
        assert listed_post.status_code == 200, listed_post.text
        assert listed_post.headers["access-control-allow-origin"] == "https://app.example"
        assert 200 <= listed_preflight.status_code < 300
        post, preflight = answers["http://tickets.example"]
        assert post.status_code == 200, "the host guard refused: the CORS rule was not reached"
        assert "access-control-allow-origin" not in post.headers, post.headers
        assert preflight.status_code == 400, preflight.status_code
        assert "access-control-allow-origin" not in preflight.headers, preflight.headers
    finally:
        stop(server.process)
