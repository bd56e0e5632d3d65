"""Faults and HTTP security: a locked database answered in bounded time and recovered
without a restart (C05 b, the lock variant), a call past the tool deadline; a token in the query string is refused
and never logged; the Authorization header never reaches the logs."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import pytest
from fastmcp import Client

from tests.hardening.support import add_caller, assert_no_leak_beyond_echo, result_text
from tests.transports.conftest import http_server, start_http_server, stop  # noqa: F401  (fixture)
from tests.transports.test_stdio import INIT
from ticket_server.server import build_server
from ticket_server.settings import Settings

pytestmark = pytest.mark.sqlite_only


@contextmanager
def exclusive_lock(db_path: Path) -> Iterator[None]:
    """Another connection's exclusive lock on the SQLite file while the block runs."""
    holder = sqlite3.connect(db_path, timeout=0)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()


async def test_c05b_locked_database_answers_unavailable_then_recovers(
    db_path: Path, settings: Settings
) -> None:
    """C05 (b), lock variant: while another process holds an exclusive lock on the
    SQLite file, a call answers isError "ticket database unavailable" within a bounded
    time, with no internals; once the lock is gone the next call succeeds, no restart.
    The file is in rollback-journal mode: in WAL mode (the default) readers do not wait
    for a lock, which tests/transports/test_stdio_startup.py shows."""
    server = build_server(
        settings.model_copy(update={"database_timeout": 1.0, "sqlite_journal_mode": "delete"})
    )
    async with Client(server, mode="2026-07-28") as client:
        assert (
            await client.call_tool_mcp("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        ).is_error is False
        with exclusive_lock(db_path):
            for tool, arguments in [
                ("get_ticket_status_v2", {"ticket_id": "SUP-4412"}),
                ("search_tickets_v2", {"query": "invoice"}),
                ("search_tickets", {"query": "invoice"}),
            ]:
                started = time.monotonic()
                result = await client.call_tool_mcp(tool, arguments)
                elapsed = time.monotonic() - started
                assert result.is_error is True, result
                text = result_text(result)
                assert "ticket database is unavailable" in text
                assert_no_leak_beyond_echo(text, arguments)
                assert elapsed < 15, f"{tool} took {elapsed:.1f}s while the database was locked"
        result = await client.call_tool_mcp("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert result.is_error is False, result_text(result)


async def test_a_call_past_the_tool_deadline_is_answered_and_the_next_one_served(
    db_path: Path, settings: Settings
) -> None:
    """The tool deadline (``compat.deadline``) fires before a longer database timeout: a
    call whose read waits on a lock past ``tool_timeout`` is stopped and answered "took
    longer than", with nothing changed; the next call, once the lock is gone, succeeds."""
    server = build_server(
        settings.model_copy(
            update={"tool_timeout": 0.5, "database_timeout": 10.0, "sqlite_journal_mode": "delete"}
        )
    )
    async with Client(server, mode="2026-07-28") as client:
        assert (
            await client.call_tool_mcp("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        ).is_error is False
        with exclusive_lock(db_path):
            started = time.monotonic()
            result = await client.call_tool_mcp("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            elapsed = time.monotonic() - started
        assert result.is_error is True, result
        assert "took longer than 0.5 seconds" in result_text(result), result_text(result)
        assert elapsed < 5, f"answered after {elapsed:.1f}s, not at the tool deadline"
        result = await client.call_tool_mcp("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert result.is_error is False, result_text(result)


def test_query_string_token_is_refused_and_never_logged(db_path: Path, tmp_path: Path) -> None:
    """No token is accepted from the query string (401), and neither that token nor the
    Authorization header of accepted requests appears anywhere in the server's logs."""
    token = add_caller(db_path, "secretive")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_LOG_LEVEL="DEBUG")
    try:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        with httpx.Client(timeout=10) as client:
            for query in (
                f"access_token={token}",
                f"token={token}",
                f"authorization=Bearer%20{token}",
            ):
                refused = client.post(f"{server.url}?{query}", json=INIT, headers=headers)
                assert refused.status_code == 401
                assert token not in refused.text
            accepted = client.post(
                server.url, json=INIT, headers={**headers, "Authorization": f"Bearer {token}"}
            )
            assert accepted.status_code == 200
    finally:
        stop(server.process)
    logs = server.logs()
    assert "POST /mcp" in logs, "the access log is on"
    assert token not in logs
    assert token.removeprefix("tks_")[:16] not in logs
    assert "Bearer " not in logs


def _listening_addresses(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on ``port`` (/proc/net/tcp, tcp6)."""
    import ipaddress

    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(str(ipaddress.ip_address(raw)))
    return found


def test_loopback_bind_by_default(http_server) -> None:
    """The HTTP server started without --host (and no TICKET_SERVER_HOST) listens on
    127.0.0.1 only: the socket the kernel holds, not the setting's default."""
    assert _listening_addresses(http_server.port) == {"127.0.0.1"}
