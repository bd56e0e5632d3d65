"""Benchmark 3: cold start over stdio, from spawning the process until the tools/list
answer arrives (initialize, notifications/initialized, tools/list as JSON lines), ours
(`ticket-server serve`, on the 10k-ticket SQLite file) against the bare FastMCP server.
Median of RUNS spawns each, alternating."""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import PYTHON, ROOT, log, median, sqlite_copy, sqlite_url

RUNS = 7


def _send(proc: subprocess.Popen, msg: dict) -> None:
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()


def _read_response(proc: subprocess.Popen, id_: int) -> dict:
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"server closed stdout (exit {proc.poll()})")
        msg = json.loads(line)
        if msg.get("id") == id_:
            return msg


def list_tools(proc: subprocess.Popen) -> list[dict]:
    """The legacy handshake (initialize, notifications/initialized), then tools/list."""
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
    )
    _read_response(proc, 1)
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    return _read_response(proc, 2)["result"]["tools"]


def stop(proc: subprocess.Popen, timeout: float) -> None:
    """End of input, as a client closing; killed if it is not gone within ``timeout``."""
    proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def spawn_to_list(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, **env},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        tools = list_tools(proc)
        elapsed = time.perf_counter() - t
    finally:
        stop(proc, 10)
    return elapsed, len(tools)


def run() -> dict[str, object]:
    log("cold start over stdio ...")
    # An installed package has its bytecode compiled (pip does it at install time); an
    # editable checkout, with PYTHONDONTWRITEBYTECODE set or sources newer than their
    # caches, would recompile ours on every spawn, which no deployment does.
    for package in ("ticket_server", "migrations"):
        compileall.compile_dir(ROOT / package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(10_000, Path(tmp) / "t.db")
        env = {"TICKET_SERVER_DATABASE_URL": sqlite_url(db), "FASTMCP_CHECK_FOR_UPDATES": "off"}
        ours_cmd = [str(Path(PYTHON).parent / "ticket-server"), "serve"]
        bare_cmd = [PYTHON, "bench/bare_server.py"]
        spawn_to_list(ours_cmd, env)  # warm the OS file cache
        spawn_to_list(bare_cmd, env)
        runs: dict[str, list[float]] = {"ours": [], "bare": []}
        tools = {}
        for _ in range(RUNS):
            s, tools["ours"] = spawn_to_list(ours_cmd, env)
            runs["ours"].append(s)
            s, tools["bare"] = spawn_to_list(bare_cmd, env)
            runs["bare"].append(s)
    ours, bare = median(runs["ours"]), median(runs["bare"])
    log(f"  ours {ours:.3f} s  bare {bare:.3f} s  ratio {ours / bare:.2f}")
    return {"ours": ours, "bare": bare, "ratio": ours / bare, "runs": runs, "tools": tools}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
