"""Servers for the client kit's tests: ours over stdio and HTTP, the legacy-only server,
mcp-server-time from PyPI, and the small misbehaving servers of servers.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
