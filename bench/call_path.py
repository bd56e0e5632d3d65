"""How many of this project's functions and files one ``tools/call`` passes through
(issue 30: "one lookup by id passes through 54 functions in 15 files").

Counted with ``sys.setprofile`` (and ``threading.setprofile`` for the worker threads of
the SQLite reads): every ``call`` event whose code lives under ``ticket_server/`` during
one ``get_ticket_status_v2`` call by id, in memory, after a warm-up call; distinct
functions (file and qualified name) and distinct files. Comprehensions and generator
expressions count as their own functions (they are, to the interpreter). The bare FastMCP
server's own path is not ours and not counted. Over HTTP (``--http``) the same count
covers the ASGI gate in front of it as well, one stateless 2026-07-28 POST.

    .venv/bin/python -m bench.call_path [--http] [--show]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from bench.common import sqlite_copy, sqlite_url

PACKAGE = str(Path(__file__).resolve().parents[1] / "ticket_server")
TICKET = "SUP-4412"


class Tracer:
    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_filename.startswith(PACKAGE):
                self.seen.add((os.path.relpath(code.co_filename, PACKAGE), code.co_qualname))

    def __enter__(self) -> Tracer:
        threading.setprofile(self)
        sys.setprofile(self)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


async def in_memory() -> set[tuple[str, str]]:
    from fastmcp import Client

    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    async with Client(build_server(Settings())) as client:
        await client.call_tool("get_ticket_status_v2", {"ticket_id": TICKET})  # warm-up
        with Tracer() as tracer:
            result = await client.call_tool("get_ticket_status_v2", {"ticket_id": TICKET})
        assert not result.is_error, result
    return tracer.seen


async def over_http() -> set[tuple[str, str]]:
    import httpx2 as httpx

    from ticket_server.server import build_runtime
    from ticket_server.settings import Settings
    from ticket_server.transports.http import build_http_app

    app = build_http_app(build_runtime(Settings()))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "get_ticket_status_v2",
            "arguments": {"ticket_id": TICKET},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "get_ticket_status_v2",
        "Authorization": f"Bearer {os.environ['BENCH_TOKEN']}",
    }
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client,
    ):
        (await client.post("/mcp", json=body, headers=headers)).raise_for_status()
        with Tracer() as tracer:
            answer = await client.post("/mcp", json=body, headers=headers)
        assert answer.status_code == 200 and '"isError":true' not in answer.text, answer.text
    return tracer.seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="count through the HTTP gate too")
    parser.add_argument("--show", action="store_true", help="list the functions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(10_000, Path(tmp) / "t.db")
        os.environ["TICKET_SERVER_DATABASE_URL"] = sqlite_url(db)
        os.environ.setdefault("TICKET_SERVER_TOOL_RATE_LIMIT", "1000000/second")
        os.environ.setdefault("TICKET_SERVER_HTTP_RATE_LIMIT", "1000000/second")
        if args.http:
            import subprocess

            made = subprocess.run(
                [sys.executable, "-m", "ticket_server", "callers", "add", "bench", "--scope",
                 "tickets:read"],
                capture_output=True, text=True, check=True, env=os.environ,
            )  # fmt: skip
            os.environ["BENCH_TOKEN"] = made.stdout.strip().split()[-1]
        seen = asyncio.run(over_http() if args.http else in_memory())
    files = {f for f, _ in seen}
    where = "HTTP POST /mcp (2026-07-28)" if args.http else "in memory"
    print(
        f"one get_ticket_status_v2 call by id, {where}: {len(seen)} functions in {len(files)} files"
    )
    if args.show:
        for f, q in sorted(seen):
            print(f"  {f}: {q}")


if __name__ == "__main__":
    main()
