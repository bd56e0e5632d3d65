"""Benchmark 5: resident memory (VmRSS) of the stdio server: idle (after initialize and
tools/list) and after 100 / 2,500 / 5,000 / 10,000 calls of get_ticket_status_v2 (with all
middleware: the audit rows are written to the database in the background), against the
bare server after as many calls of its tool. Ours loads its database layer (SQLAlchemy,
the engine) on the first call, so "flat" is judged from 100 calls on: growth before that
is a one-time load, growth after it would be a leak or an unbounded structure."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bench.calls import UNLIMITED
from bench.coldstart import _read_response, _send, list_tools, stop
from bench.common import PYTHON, ROOT, log, sqlite_copy, sqlite_url

CALLS = 10_000
CHECKPOINTS = (100, 2_500, 5_000, 10_000)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _profile(cmd: list[str], env: dict[str, str], tool: str) -> dict[str, float]:
    import os
    import subprocess

    proc = subprocess.Popen(
        cmd,
        env={**os.environ, **env},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    out: dict[str, float] = {}
    try:
        list_tools(proc)
        time.sleep(1.5)
        out["idle"] = rss_mb(proc.pid)
        i = 2
        for n in range(1, CALLS + 1):
            i += 1
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": {"ticket_id": "SUP-4412"}},
                },
            )
            r = _read_response(proc, i)
            assert not r["result"].get("isError"), r
            if n in CHECKPOINTS:
                time.sleep(1.5)  # let the audit writer flush
                out[str(n)] = rss_mb(proc.pid)
    finally:
        stop(proc, 15)
    return out


def run() -> dict[str, object]:
    log(f"memory: idle and after {CALLS:,} calls over stdio ...")
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(10_000, Path(tmp) / "t.db")
        env = {
            "TICKET_SERVER_DATABASE_URL": sqlite_url(db),
            "TICKET_SERVER_TOOL_RATE_LIMIT": UNLIMITED,
            "FASTMCP_CHECK_FOR_UPDATES": "off",
        }
        ours = _profile(
            [str(Path(PYTHON).parent / "ticket-server"), "serve"], env, "get_ticket_status_v2"
        )
        bare = _profile([PYTHON, "bench/bare_server.py"], env, "get_status")
    log(f"  ours {ours}  bare {bare}")
    return {"ours": ours, "bare": bare, "ratio_after": ours[str(CALLS)] / bare[str(CALLS)]}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
