"""The timing signal of a caller limited to queues (issue 32): does a search of words
that only other queues hold take longer than one of words held nowhere? If it does, the
time tells the caller those words exist elsewhere.

On the 2,400-ticket sample (SQLite), in memory, a billing-only caller runs 16-word
conversation searches, alternating: words only other queues hold, and as many words
held nowhere; the same two queries by an unscoped caller are printed beside them.
Prints p50 / p90 per query (ms) and the ratio. Run on its own:

    .venv/bin/python -m bench.scope_timing [--rounds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import PYTHON, log, median, percentile, sqlite_url
from bench.fairness import _words_only_other_queues_hold

NOWHERE = " ".join(f"zqx{chr(97 + i)}vul{chr(97 + i)}morp" for i in range(16))
"""16 words no ticket holds (and no one-letter neighbour of which any ticket holds)."""


async def _time(settings_env: dict[str, str], queries: dict[str, str], rounds: int) -> dict:
    from fastmcp import Client

    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    os.environ.update(settings_env)
    out: dict[str, list[float]] = {k: [] for k in queries}
    async with Client(build_server(Settings())) as client:
        for _ in range(3):  # warm
            for q in queries.values():
                await client.call_tool(
                    "search_tickets_v2", {"query": q, "search_in": "conversation"}
                )
        for _ in range(rounds):
            for key, q in queries.items():
                started = time.perf_counter()
                r = await client.call_tool(
                    "search_tickets_v2", {"query": q, "search_in": "conversation", "limit": 50}
                )
                out[key].append(time.perf_counter() - started)
                assert not r.is_error, r
    return out


def run(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "tickets.db"
        env = {
            **os.environ,
            "TICKET_SERVER_DATABASE_URL": sqlite_url(db),
            "TICKET_SERVER_TOOL_RATE_LIMIT": "1000000/second",
            "TICKET_SERVER_LOG_LEVEL": "WARNING",
        }
        exe = str(Path(PYTHON).parent / "ticket-server")
        for command in (["db", "upgrade"], ["db", "seed", "--if-empty"]):
            subprocess.run([exe, *command], env=env, capture_output=True, check=True)
        for name, options in (("billing", ["--queue", "billing"]), ("everyone", [])):
            subprocess.run(
                [exe, "callers", "add", name, "--scope", "tickets:read", *options],
                env=env,
                capture_output=True,
                check=True,
            )
        queries = {"elsewhere": _words_only_other_queues_hold(db), "nowhere": NOWHERE}
        for caller in ("billing", "everyone"):
            figures = asyncio.run(
                _time({**env, "TICKET_SERVER_STDIO_CALLER": caller}, queries, rounds)
            )
            e, n = figures["elsewhere"], figures["nowhere"]
            log(
                f"{caller:9} elsewhere p50 {median(e) * 1000:6.1f} p90 {percentile(e, 0.9) * 1000:6.1f} ms"
                f" | nowhere p50 {median(n) * 1000:6.1f} p90 {percentile(n, 0.9) * 1000:6.1f} ms"
                f" | ratio of p50s {median(e) / median(n):.2f}"
            )
    log(f"load: {os.getloadavg()[0]:.1f} (1 min), {rounds} rounds")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.scope_timing")
    p.add_argument("--rounds", type=int, default=40)
    run(p.parse_args().rounds)


if __name__ == "__main__":
    main()
