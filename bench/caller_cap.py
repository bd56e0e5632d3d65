"""Another caller's lookups while one caller floods the deprecated substring search
(issue 16, item 13), on a generated data set: one HTTP server, 60 concurrent
``search_tickets`` calls from one caller against the per-caller concurrency cap,
while a second caller makes lookups one after another; the same lookups alone first
as the baseline. Run on its own:

    .venv/bin/python -m bench.caller_cap [--count 300000] [--cap 8] [--lookups 50] [--wal]

The data set is made once by the seed generator into .cache/bench/ (see README) and
reused. Prints only; nothing is written."""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.common import (
    PYTHON,
    free_port,
    log,
    median,
    percentile,
    server_process,
    sqlite_copy,
    sqlite_url,
)

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(
    http, url: str, token: str, request_id: int, name: str, arguments: dict
):  # -> httpx.Response
    return http.post(
        url,
        timeout=120,
        json={
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META},
        },
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
        },
    )


def lookups(url: str, token: str, count: int, ticket: str) -> list[float]:
    import httpx2 as httpx

    took = []
    with httpx.Client(timeout=120) as http:
        for i in range(count):
            started = time.perf_counter()
            answer = call(http, url, token, i, "get_ticket_status_v2", {"ticket_id": ticket})
            took.append(time.perf_counter() - started)
            assert answer.status_code == 200 and '"isError":true' not in answer.text.replace(
                " ", ""
            ), answer.text[:300]
    return took


def run(count: int, cap: int, n_lookups: int, searches: int, wal: bool = False) -> None:
    import httpx2 as httpx

    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(count, Path(tmp) / "t.db")
        import sqlite3

        with sqlite3.connect(db) as con:
            ticket = con.execute("SELECT id FROM tickets ORDER BY pk DESC LIMIT 1").fetchone()[0]
            if wal:
                con.execute("PRAGMA journal_mode=WAL")
        env = {
            "TICKET_SERVER_DATABASE_URL": sqlite_url(db),
            "FASTMCP_CHECK_FOR_UPDATES": "off",
            "TICKET_SERVER_CALLER_CONCURRENCY": str(cap),
            "TICKET_SERVER_HTTP_RATE_LIMIT": "100000/minute",
            "TICKET_SERVER_TOOL_RATE_LIMIT": "100000/minute",
        }
        exe = str(Path(PYTHON).parent / "ticket-server")
        full = {**os.environ, **env}
        flooder, other = (
            subprocess.run(
                [exe, "callers", "add", name, "--scope", "tickets:read"],
                env=full,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            for name in ("flooder", "other")
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        with server_process([exe, "serve", "--transport", "http", "--port", str(port)], env, url):
            with httpx.Client(timeout=120) as http:
                started = time.perf_counter()
                call(http, url, flooder, 0, "search_tickets", {"query": "e", "limit": 50})
                one_search = time.perf_counter() - started
            quiet = lookups(url, other, n_lookups, ticket)
            outcomes: list[str] = []

            def search(i: int) -> None:
                with httpx.Client(timeout=120) as http:
                    answer = call(
                        http, url, flooder, i, "search_tickets", {"query": "e", "limit": 50}
                    )
                    outcomes.append(
                        "busy"
                        if "calls running" in answer.text
                        else "error"
                        if '"isError":true' in answer.text.replace(" ", "")
                        else "ran"
                    )

            floods = [threading.Thread(target=search, args=(i,)) for i in range(searches)]
            started = time.perf_counter()
            for t in floods:
                t.start()
            busy = lookups(url, other, n_lookups, ticket)
            for t in floods:
                t.join()
            flood_seconds = time.perf_counter() - started
    log(
        f"{count:,} tickets ({'WAL' if wal else 'rollback journal'}), cap {cap}: one deprecated search alone {one_search * 1000:.0f} ms; "
        f"{searches} concurrent: {outcomes.count('ran')} ran, {outcomes.count('busy')} refused (busy), "
        f"{outcomes.count('error')} other errors, all done in {flood_seconds:.1f} s"
    )
    for name, figures in (("alone", quiet), ("during the flood", busy)):
        log(
            f"  other caller's {len(figures)} lookups {name}: p50 {median(figures) * 1000:.1f} ms, "
            f"p99 {percentile(figures, 0.99) * 1000:.1f} ms, worst {max(figures) * 1000:.1f} ms"
        )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.caller_cap")
    p.add_argument("--count", type=int, default=300_000)
    p.add_argument("--cap", type=int, default=8)
    p.add_argument("--lookups", type=int, default=50)
    p.add_argument("--searches", type=int, default=60)
    p.add_argument("--wal", action="store_true", help="put the copy in WAL mode first")
    a = p.parse_args()
    run(a.count, a.cap, a.lookups, a.searches, a.wal)


if __name__ == "__main__":
    main()
