"""Real processes: `ticket-server serve` over stdio and over HTTP on a loopback port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.conftest import sqlite_url
from ticket_server.tools.toolsets import TOOLSETS

TICKET_SERVER = [sys.executable, "-m", "ticket_server"]


def as_url(database: Path | str) -> str:
    """A database given as its SQLite file (``db_path``) or as a URL (``database_url``)."""
    return sqlite_url(database) if isinstance(database, Path) else database


def server_env(db_path: Path | str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    env["TICKET_SERVER_DATABASE_URL"] = as_url(db_path)
    # Tests that are not about rate limits must never meet one (C10 makes 200 calls).
    env["TICKET_SERVER_TOOL_RATE_LIMIT"] = "100000/minute"
    # Every toolset, as the in-memory tests have it (the default offers fewer).
    env["TICKET_SERVER_TOOLSETS"] = json.dumps(list(TOOLSETS))
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_caller(
    db_path: Path | str, name: str, scopes: tuple[str, ...] = ("tickets:read",), **options
) -> str:
    """Create a caller in the database at ``db_path`` (a SQLite file or a URL); returns its token."""
    import asyncio

    from tests.helpers import create_caller

    def add():  # a fresh coroutine for whichever loop runs it
        return create_caller(as_url(db_path), name, scopes, **options)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(add())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # called from an async test
        return pool.submit(asyncio.run, add()).result()


def wait_for_log(
    read_logs: Callable[[], str],
    predicate: Callable[[dict], bool],
    count: int = 1,
    timeout: float = 30,
) -> list[dict]:
    """The first ``count`` JSON log records (from ``read_logs()``, a server's stderr) for
    which ``predicate`` holds, once there are that many: a test waits for the server to
    say it has done something, instead of sleeping and hoping it has."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for line in read_logs().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and predicate(record):
                found.append(record)
        if len(found) >= count:
            return found[:count]
        assert time.monotonic() < deadline, (
            f"{len(found)} of {count} log records after {timeout} s: {read_logs()[-3000:]}"
        )
        time.sleep(0.02)


def tool_handler_called(tool: str) -> Callable[[dict], bool]:
    """Predicate: FastMCP's DEBUG record that a tools/call of ``tool`` reached its handler
    (the server must run with TICKET_SERVER_LOG_LEVEL=DEBUG)."""
    return lambda record: record.get("message", "").startswith(
        f"[ticket-server] Handler called: call_tool {tool} "
    )


def audit_records(logs: str) -> list[dict]:
    """The audit records (one per tools/call) a server logged, in order."""
    records = []
    for line in logs.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("logger") == "ticket_server.audit":
            records.append(record["audit"])
    return records


@contextmanager
def database_locked(database_url: str) -> Iterator[None]:
    """Every read of the tickets waits until the block ends: an SQLite EXCLUSIVE lock on
    the file, or a PostgreSQL ACCESS EXCLUSIVE lock on the table."""
    import sqlite3

    from tests.postgres import table_locked

    if database_url.startswith("postgresql"):
        with table_locked(database_url):
            yield
        return
    lock = sqlite3.connect(database_url.removeprefix("sqlite+aiosqlite:///"), timeout=1)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        lock.rollback()
        lock.close()


def wait_until_waiting(
    database_url: str, read_logs: Callable[[], str], tool: str, count: int, earlier: int = 0
) -> None:
    """Return once ``count`` calls of ``tool`` wait on the locked database
    (``database_locked``): on PostgreSQL, seen waiting in pg_stat_activity; on SQLite
    (which shows no sign of a waiting reader), seen reaching the tool in the server's
    DEBUG log (after the ``earlier`` calls of it), after which the locked database is the
    only thing left for them to wait on when the caller is cached (WAITING below)."""
    from tests.postgres import wait_for_lock_waiters

    if database_url.startswith("postgresql"):
        wait_for_lock_waiters(database_url, count)
    else:
        wait_for_log(read_logs, tool_handler_called(tool), earlier + count)


# Settings for a server whose calls wait on `database_locked`: a long query deadline, the
# caller cached (over HTTP the token is looked up in the callers table, which on SQLite
# the lock also holds), DEBUG for the handler records `wait_until_waiting` reads, and on
# SQLite the rollback journal (in WAL mode, the default, an EXCLUSIVE lock holds no reader).
WAITING = dict(
    TICKET_SERVER_DATABASE_TIMEOUT="60",
    TICKET_SERVER_CALLER_CACHE_SECONDS="600",
    TICKET_SERVER_LOG_LEVEL="DEBUG",
    TICKET_SERVER_SQLITE_JOURNAL_MODE="delete",
)


class HttpServer:
    def __init__(self, process: subprocess.Popen[bytes], port: int, stderr: Path) -> None:
        self.process, self.port, self.stderr = process, port, stderr
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/mcp"
        self.token: str | None = None

    def transport(self, token: str | None = None):  # -> an mcp.Client transport
        """Streamable HTTP to this server with ``Authorization: Bearer`` (default: its token)."""
        from mcp.client.streamable_http import streamable_http_client

        bearer = token or self.token
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        return streamable_http_client(
            self.url, http_client=httpx.AsyncClient(headers=headers, timeout=30)
        )

    def logs(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")


def start_http_server(
    db_path: Path | str, tmp_path: Path, *args: str, port: int | None = None, **env: str
) -> HttpServer:
    """`ticket-server serve --transport http` on ``port`` (default: a free one), with
    ``args`` and ``env`` added."""
    port = port or free_port()
    stderr = tmp_path / f"http-{port}.stderr"
    process = subprocess.Popen(
        [*TICKET_SERVER, "serve", "--transport", "http", "--port", str(port), *args],
        env=server_env(db_path, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr.open("wb"),
    )
    server = HttpServer(process, port, stderr)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited {process.returncode}: {server.logs()}")
        try:
            if httpx.get(f"{server.base}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server did not come up: {server.logs()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def http_server(db_path: Path, tmp_path: Path) -> Iterator[HttpServer]:
    """A server with one caller, `tester` (tickets:read, every queue): its token in `.token`."""
    token = add_caller(db_path, "tester")
    server = start_http_server(db_path, tmp_path)
    server.token = token
    try:
        yield server
    finally:
        stop(server.process)
