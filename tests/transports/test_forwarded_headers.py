"""C39: proxy headers are trusted only from the addresses an operator configures
(`TICKET_SERVER_FORWARDED_ALLOW_IPS`, default none). A real HTTP server on loopback."""

from __future__ import annotations

import random
from pathlib import Path

import httpx2 as httpx
import pytest
from pydantic import ValidationError

from tests.transports.conftest import start_http_server, stop
from ticket_server.settings import Settings

INIT = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _random_address() -> str:
    return ".".join(str(random.randint(1, 254)) for _ in range(4))


def test_c39_forwarded_for_is_ignored_without_a_configured_proxy(
    db_path: Path, tmp_path: Path
) -> None:
    """C39: no proxy configured: tokenless requests, each with a random
    `X-Forwarded-For`, all count against the socket's address (the 6th of a 5-a-minute
    limit is 429), and `X-Forwarded-For: 203.0.113.9` leaves /metrics as open as
    without it to a loopback client (the header does not make it remote either)."""
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_HTTP_RATE_LIMIT="5/minute")
    try:
        statuses = [
            httpx.post(
                server.url, json=INIT, headers={"X-Forwarded-For": _random_address()}
            ).status_code
            for _ in range(6)
        ]
        assert statuses == [401] * 5 + [429], statuses
        metrics = httpx.get(f"{server.base}/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
        assert metrics.status_code == 200
    finally:
        stop(server.process)


def test_c39_forwarded_for_is_read_from_a_configured_proxy(db_path: Path, tmp_path: Path) -> None:
    """With the loopback proxy configured, its `X-Forwarded-For` is the client: each
    address has its own allowance (six addresses, six 401s), and a remote client's
    request through it finds /metrics closed (403) while a local one's is served."""
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_HTTP_RATE_LIMIT="5/minute",
        TICKET_SERVER_FORWARDED_ALLOW_IPS="127.0.0.1, ::1",
    )
    try:
        statuses = [
            httpx.post(
                server.url, json=INIT, headers={"X-Forwarded-For": f"203.0.113.{n}"}
            ).status_code
            for n in range(1, 7)
        ]
        assert statuses == [401] * 6, statuses
        remote = httpx.get(f"{server.base}/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
        assert remote.status_code == 403
        local = httpx.get(f"{server.base}/metrics", headers={"X-Forwarded-For": "127.0.0.1"})
        assert local.status_code == 200
    finally:
        stop(server.process)


def test_forwarded_allow_ips_must_be_addresses() -> None:
    """A value that is not an address, a network or * is refused naming the shape."""
    assert Settings(forwarded_allow_ips=" 10.0.0.5 ,10.1.0.0/16").forwarded_allow_ips == (
        "10.0.0.5,10.1.0.0/16"
    )
    with pytest.raises(ValidationError, match="not an address or a network"):
        Settings(forwarded_allow_ips="proxy.internal")
