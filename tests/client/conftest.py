"""Servers for the client kit's tests: ours over stdio and HTTP, the legacy-only server,
mcp-server-time from PyPI, and the small misbehaving servers of servers.py."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.transports.conftest import (  # noqa: F401  (re-exported fixtures)
    TICKET_SERVER,
    http_server,
    server_env,
)
from ticket_server.client import ServerConfig

HERE = Path(__file__).parent
LEGACY_SERVER = [sys.executable, str(HERE.parent / "clients" / "legacy_server.py")]
TIME_SERVER = [str(Path(sys.executable).parent / "mcp-server-time"), "--local-timezone", "UTC"]

# The two ways a kit connects: "auto" (server/discover answered: 2026-07-28) and "legacy".
REVISIONS = [("auto", "2026-07-28", "server/discover"), ("legacy", "2025-11-25", "initialize")]


def kit_server(kind: str) -> list[str]:
    """The command of one of servers.py's servers."""
    return [sys.executable, str(HERE / "servers.py"), kind]


def stdio(name: str, command: list[str], **fields: Any) -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command=command, **fields)


def ours_stdio(db_path: Path, **fields: Any) -> ServerConfig:
    """Our server over stdio on the test's SQLite copy of the sample database."""
    return ServerConfig(
        name="tickets",
        transport="stdio",
        command=[*TICKET_SERVER, "serve"],
        env=server_env(db_path),
        **fields,
    )


# The MCP reference servers on npm (written by others), pinned in .ci/reference-servers/
# and installed into .cache/reference-servers by its install.sh (run once per test session).
ROOT = HERE.parents[1]
REFERENCE_INSTALL = ROOT / ".ci" / "reference-servers" / "install.sh"
REFERENCE_BIN = ROOT / ".cache" / "reference-servers" / "node_modules" / ".bin"


@pytest.fixture(scope="session")
def reference_servers() -> Path:
    """The folder holding the pinned reference servers' commands (``mcp-server-everything``,
    ``mcp-server-memory``, ``mcp-server-filesystem``); installed on first use. Without npm
    and no installed copy the tests fail: they never skip."""
    if shutil.which("npm") is None and not (REFERENCE_BIN / "mcp-server-everything").exists():
        pytest.fail("npm is needed once to install the pinned MCP reference servers")
    done = subprocess.run(
        ["bash", str(REFERENCE_INSTALL)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return REFERENCE_BIN


def everything(bin_dir: Path, **fields: Any) -> ServerConfig:
    """@modelcontextprotocol/server-everything over stdio."""
    fields.setdefault("name", "everything")
    fields.setdefault("transport", "stdio")
    return ServerConfig(command=[str(bin_dir / "mcp-server-everything"), "stdio"], **fields)


@pytest.fixture
def everything_http(reference_servers: Path) -> Iterator[str]:
    """server-everything's Streamable HTTP transport on a free loopback port: its URL."""
    from tests.transports.conftest import free_port

    port = free_port()
    entry = (
        reference_servers.parent
        / "@modelcontextprotocol"
        / "server-everything"
        / "dist"
        / "index.js"
    )
    process = subprocess.Popen(
        ["node", str(HERE / "loopback.mjs"), str(entry), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None:
                pytest.fail(f"server-everything (HTTP) exited: {process.stderr.read()[-2000:]}")
            time.sleep(0.1)
        else:
            pytest.fail("server-everything (HTTP) did not listen within 30 s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
