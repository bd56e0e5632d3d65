"""Benchmark 1: calls/s of get_ticket_status_v2 with all middleware on (audit, authorization,
rate limit, deprecation) against the bare FastMCP tool, in memory and over HTTP with 16
concurrent callers (each its own token; only answered calls count). Each figure is the median
of ROUNDS rounds; ours and bare alternate."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    PYTHON,
    ROOT,
    free_port,
    log,
    median,
    server_process,
    sqlite_copy,
    sqlite_url,
)

ROUNDS = 3
TICKET = "SUP-4412"
# A limit the benchmark never reaches, so the limiter runs on every call and never refuses.
# Per second, not per minute: `limits`' moving window keeps one entry per call made within
# the window, up to the limit; a per-minute limit this high would hold a minute of calls
# (tens of thousands of entries, shifted on every hit), which no real limit does (the
# default 60/minute holds at most 60).
UNLIMITED = "1000000/second"


def bench_env(db: Path) -> dict[str, str]:
    return {
        "TICKET_SERVER_DATABASE_URL": sqlite_url(db),
        "TICKET_SERVER_TOOL_RATE_LIMIT": UNLIMITED,
        "TICKET_SERVER_HTTP_RATE_LIMIT": UNLIMITED,
        "FASTMCP_CHECK_FOR_UPDATES": "off",
    }


# --- in memory (run in a child process: its stderr, where the audit lines go, is discarded)


async def _inmem(n: int) -> dict[str, list[float]]:
    from fastmcp import Client

    from bench.bare_server import build_bare
    from ticket_server.logging import configure_logging
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    settings = Settings()  # from bench_env()
    configure_logging(
        settings.log_level, settings.log_format
    )  # audit lines: JSON on stderr, as served
    ours, bare = build_server(settings), build_bare()
    out: dict[str, list[float]] = {"ours": [], "bare": []}
    async with Client(ours) as co, Client(bare) as cb:
        cases = [("ours", co, "get_ticket_status_v2"), ("bare", cb, "get_status")]
        for _, c, tool in cases:  # warm-up
            for _ in range(200):
                r = await c.call_tool(tool, {"ticket_id": TICKET})
                assert not r.is_error, r
        for _ in range(ROUNDS):
            for key, c, tool in cases:
                t = time.perf_counter()
                for _ in range(n):
                    await c.call_tool(tool, {"ticket_id": TICKET})
                out[key].append(n / (time.perf_counter() - t))
    return out


def in_memory(n: int = 2000) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(10_000, Path(tmp) / "t.db")
        proc = subprocess.run(
            [PYTHON, "-m", "bench.calls", "_inmem", str(n)],
            cwd=ROOT,
            env={**os.environ, **bench_env(db)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            check=True,
        )
    runs = json.loads(proc.stdout)
    ours, bare = median(runs["ours"]), median(runs["bare"])
    return {"ours": ours, "bare": bare, "ratio": ours / bare, "runs": runs, "calls_per_round": n}


# --- HTTP: 16 concurrent callers, each its own token, one stateless POST per call ---------

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}


async def _http_load(url: str, tool: str, tokens: list[str | None], seconds: float) -> float:
    """Answered calls a second, one caller per token, each sending its next call when its
    last is answered. Every answer must be a result: a refusal (an ``isError`` such as
    "this caller already has 8 calls running") is cheaper than a call and is not counted
    as one; it stops the run."""
    import httpx2

    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"ticket_id": TICKET}, "_meta": META},
        }
    )
    done = 0
    async with contextlib.AsyncExitStack() as stack:
        clients = [  # one client, one connection, per caller, as separate assistants have
            await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers={**headers, **({"authorization": f"Bearer {token}"} if token else {})},
                    limits=httpx2.Limits(max_connections=1),
                    timeout=30,
                )
            )
            for token in tokens
        ]

        async def call(client: httpx2.AsyncClient) -> None:
            r = await client.post(url, content=body)
            if r.status_code != 200 or '"isError":false' not in r.text:
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:300]}")

        await asyncio.gather(*(call(client) for client in clients))  # each connection open
        stop = time.perf_counter() + seconds

        async def caller(client: httpx2.AsyncClient) -> None:
            nonlocal done
            while time.perf_counter() < stop:
                await call(client)
                done += 1

        t = time.perf_counter()
        await asyncio.gather(*(caller(client) for client in clients))
        return done / (time.perf_counter() - t)


def add_callers(env: dict[str, str], count: int) -> list[str | None]:
    """``count`` callers (bench-00, bench-01, ...) allowed to read, none ever limited:
    their tokens. One token shared by every connection would be one caller, whose calls
    past its concurrency (8 by default) are answered at once with a refusal."""
    exe = str(Path(PYTHON).parent / "ticket-server")
    return [
        subprocess.run(
            [
                exe,
                "callers",
                "add",
                f"bench-{i:02d}",
                "--scope",
                "tickets:read",
                "--tool-limit",
                UNLIMITED,
                "--http-limit",
                UNLIMITED,
            ],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for i in range(count)
    ]


def http(callers: int = 16, seconds: float = 6.0) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(10_000, Path(tmp) / "t.db")
        env = bench_env(db)
        exe = str(Path(PYTHON).parent / "ticket-server")
        tokens = add_callers(env, callers)
        nobody: list[str | None] = [None] * callers
        po, pb = free_port(), free_port()
        uo, ub = f"http://127.0.0.1:{po}/mcp", f"http://127.0.0.1:{pb}/mcp"
        runs: dict[str, list[float]] = {"ours": [], "bare": []}
        with (
            server_process([exe, "serve", "--transport", "http", "--port", str(po)], env, uo),
            server_process([PYTHON, "bench/bare_server.py", "--http", str(pb)], None, ub),
        ):
            asyncio.run(_http_load(uo, "get_ticket_status_v2", tokens, 1.5))  # warm-up
            asyncio.run(_http_load(ub, "get_status", nobody, 1.5))
            for _ in range(ROUNDS):
                runs["ours"].append(
                    asyncio.run(_http_load(uo, "get_ticket_status_v2", tokens, seconds))
                )
                runs["bare"].append(asyncio.run(_http_load(ub, "get_status", nobody, seconds)))
    ours, bare = median(runs["ours"]), median(runs["bare"])
    return {"ours": ours, "bare": bare, "ratio": ours / bare, "runs": runs, "callers": callers}


def run() -> dict[str, object]:
    log("calls: in memory ...")
    mem = in_memory()
    log(f"  ours {mem['ours']:.0f}/s  bare {mem['bare']:.0f}/s  ratio {mem['ratio']:.2f}")
    log("calls: HTTP, 16 concurrent callers ...")
    web = http()
    log(f"  ours {web['ours']:.0f}/s  bare {web['bare']:.0f}/s  ratio {web['ratio']:.2f}")
    return {"in_memory": mem, "http": web}


if __name__ == "__main__":
    if sys.argv[1] == "_inmem":
        print(json.dumps(asyncio.run(_inmem(int(sys.argv[2])))))
    else:
        print(json.dumps(run(), indent=2))
