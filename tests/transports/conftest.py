"""Real processes: `ticket-server serve` over stdio and over HTTP on a loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.conftest import sqlite_url

TICKET_SERVER = [sys.executable, "-m", "ticket_server"]


def server_env(db_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    env["TICKET_SERVER_DATABASE_URL"] = sqlite_url(db_path)
    # Tests that are not about rate limits must never meet one (C10 makes 200 calls).
    env["TICKET_SERVER_TOOL_RATE_LIMIT"] = "100000/minute"
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_caller(db_path: Path, name: str, scopes: tuple[str, ...] = ("tickets:read",), **options) -> str:
    """Create a caller in the database at ``db_path``; returns its token."""
    import asyncio

    from tests.helpers import create_caller

    def add():  # a fresh coroutine for whichever loop runs it
        return create_caller(sqlite_url(db_path), name, scopes, **options)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(add())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # called from an async test
        return pool.submit(asyncio.run, add()).result()


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
        return streamable_http_client(self.url, http_client=httpx.AsyncClient(headers=headers, timeout=30))

    def logs(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")


def start_http_server(db_path: Path, tmp_path: Path, *args: str, **env: str) -> HttpServer:
    """`ticket-server serve --transport http` on a free port, with ``args`` and ``env`` added."""
    port = free_port()
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
