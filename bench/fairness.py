"""Fair shares between callers (issue 32): a second caller's `get_ticket_status_v2`
lookups, one after another, and `/healthz` polled beside them, quiet and while a first
caller floods at its limits, over HTTP on the 2,400-ticket sample (SQLite):

1. searches: a billing-only caller runs `--cap` (default 8, its concurrency cap)
   16-word conversation searches at once, of words only other queues hold, in a loop;
2. refused: the same caller tries 4x its cap at once, so most of its calls are refused;
3. tokenless: `--connections` (default 64) clients post without a token as fast as
   they can;
4. unlimited: a second billing-only caller whose limits are out of the way runs
   `--cap` searches at once, so that only its share (`--share`) holds it back.

The load generator is one process per flood, beside the server and the measuring
client on the same machine. Target: in each flood the second caller's p99 is at most 3x
its quiet p99. Run on its own (prints only; nothing is written):

    .venv/bin/python -m bench.fairness [--lookups 200] [--cap 8] [--connections 64] [--share 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.caller_cap import call
from bench.common import PYTHON, free_port, log, median, percentile, server_process, sqlite_url

TARGET = 3.0


def _flood(
    kind: str, url: str, token: str, query: str, workers: int, stop_at: Any, answers: Any
) -> None:
    """Run in its own process: ``workers`` threads sending until ``stop_at`` (a shared
    time.time() value the parent moves); then put on ``answers`` how many of each answer
    came back (HTTP status, and for a 200 whether the call was served or refused with an
    isError) and over how many seconds."""
    import httpx2 as httpx

    seen: Counter[str] = Counter()

    def loop(n: int) -> None:
        with httpx.Client(timeout=120) as http:
            i = 0
            while time.time() < stop_at.value:
                i += 1
                try:
                    if kind == "tokenless":
                        answer = http.post(
                            url,
                            json={"jsonrpc": "2.0", "id": i, "method": "ping"},
                            headers={
                                "Accept": "application/json",
                                "Content-Type": "application/json",
                            },
                        )
                    else:
                        arguments = {"query": query, "search_in": "conversation", "limit": 50}
                        answer = call(
                            http, url, token, n * 1_000_000 + i, "search_tickets_v2", arguments
                        )
                except httpx.TransportError as exc:
                    seen[type(exc).__name__] += 1
                    continue
                label = str(answer.status_code)
                if answer.status_code == 200:
                    label += " isError" if '"isError":true' in answer.text else " served"
                seen[label] += 1

    started = time.time()  # the answers are counted from here, in this process
    threads = [threading.Thread(target=loop, args=(n,), daemon=True) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    answers.put((dict(seen), time.time() - started))


def _measure(
    url: str, base: str, token: str, ticket: str, count: int
) -> tuple[list[float], list[float]]:
    """(lookup seconds, /healthz seconds) of ``count`` lookups with /healthz polled beside."""
    import httpx2 as httpx

    health: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=120) as http:
            while not done.is_set():
                started = time.perf_counter()
                http.get(f"{base}/healthz")
                health.append(time.perf_counter() - started)
                time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    took = []
    with httpx.Client(timeout=120) as http:
        for i in range(count):
            started = time.perf_counter()
            answer = call(http, url, token, i, "get_ticket_status_v2", {"ticket_id": ticket})
            took.append(time.perf_counter() - started)
            assert answer.status_code == 200, answer.text[:300]
    done.set()
    poller.join()
    return took, health


def _words_only_other_queues_hold(db: Path) -> str:
    """16 words of other queues' subjects whose search tokens no billing ticket holds, in
    its subject, its body or a comment (a conversation search reads all three), nor any
    word one letter away (which billing would be offered as a correction)."""
    from ticket_server.tickets.analyzer import query_words, spelling_candidates

    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT queue, subject FROM tickets").fetchall()
        held = con.execute(
            "SELECT search_subject || ' ' || search_body FROM tickets WHERE queue = 'billing' "
            "UNION ALL SELECT c.search_body FROM comments c JOIN tickets t ON t.id = c.ticket_id "
            "WHERE t.queue = 'billing'"
        ).fetchall()
    billing = {token for (text,) in held for token in text.split()}
    words: dict[str, str] = {}
    for q, subject in rows:
        if q == "billing":
            continue
        for token, typed in query_words(subject, limit=None):
            fresh = typed.isalpha() and len(typed) > 4 and token not in billing | words.keys()
            if fresh and not billing & spelling_candidates(typed).keys():
                words[token] = typed
    return " ".join(list(words.values())[:16])


def run(count: int, cap: int, connections: int, share: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "tickets.db"
        env = {
            "TICKET_SERVER_DATABASE_URL": sqlite_url(db),
            "FASTMCP_CHECK_FOR_UPDATES": "off",
            "TICKET_SERVER_CALLER_CONCURRENCY": str(cap),
            "TICKET_SERVER_CALLER_SHARE": str(share),
            "TICKET_SERVER_LOG_LEVEL": "WARNING",
        }
        exe = str(Path(PYTHON).parent / "ticket-server")
        full = {**os.environ, **env}
        for command in (["db", "upgrade"], ["db", "seed", "--if-empty"]):
            subprocess.run([exe, *command], env=full, capture_output=True, check=True)

        def add(name: str, *options: str) -> str:
            return subprocess.run(
                [exe, "callers", "add", name, "--scope", "tickets:read", *options],
                env=full,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()

        # The flooder keeps the default limits; the second caller's are out of the way.
        flooder = add("flooder", "--queue", "billing")
        generous = ("--tool-limit", "100000/minute", "--http-limit", "100000/minute")
        heavy = add("heavy", "--queue", "billing", *generous)
        other = add("other", *generous)
        query = _words_only_other_queues_hold(db)
        with sqlite3.connect(db) as con:
            ticket = con.execute("SELECT id FROM tickets ORDER BY pk DESC LIMIT 1").fetchone()[0]
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        url = f"{base}/mcp"
        with server_process([exe, "serve", "--transport", "http", "--port", str(port)], env, url):
            _measure(url, base, other, ticket, 20)  # warm
            figures = {"quiet": _measure(url, base, other, ticket, count)}
            sent: dict[str, tuple[dict[str, int], float]] = {}  # phase -> (answers, seconds)
            for phase, kind, token, workers in (
                ("searches", "searches", flooder, cap),
                ("refused", "searches", flooder, 4 * cap),
                ("tokenless", "tokenless", flooder, connections),
                ("unlimited", "searches", heavy, cap),
            ):
                spawn = multiprocessing.get_context("spawn")
                answers = spawn.Queue()
                stop = spawn.Value("d", time.time() + 600)
                flood = spawn.Process(
                    target=_flood, args=(kind, url, token, query, workers, stop, answers)
                )
                flood.start()
                time.sleep(2)  # the flood at full strength first
                figures[phase] = _measure(url, base, other, ticket, count)
                stop.value = time.time()
                sent[phase] = answers.get(timeout=180)
                flood.join()
                time.sleep(2)
    quiet_p99 = percentile(figures["quiet"][0], 0.99)
    log(
        f"fairness: {count} lookups of the second caller per phase; cap {cap}, share {share}; "
        f"query {query!r}"
    )
    for phase, (took, health) in figures.items():
        p99 = percentile(took, 0.99)
        verdict = (
            ""
            if phase == "quiet"
            else f"  {p99 / quiet_p99:.1f}x quiet ({'met' if p99 <= TARGET * quiet_p99 else 'MISSED'}: target {TARGET:g}x)"
        )
        log(
            f"  {phase:9}  lookup p50 {median(took) * 1000:6.1f} ms  p99 {p99 * 1000:7.1f} ms"
            f"   /healthz p50 {median(health) * 1000:6.1f} ms  p99 "
            f"{percentile(health, 0.99) * 1000:7.1f} ms{verdict}"
        )
    for phase, (seen, seconds) in sent.items():
        rates = ", ".join(f"{label} {n / seconds:.0f}/s" for label, n in sorted(seen.items()))
        log(f"  {phase:9}  the flood was answered: {rates}")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.fairness")
    p.add_argument("--lookups", type=int, default=200)
    p.add_argument("--cap", type=int, default=8)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--share", type=int, default=2, help="TICKET_SERVER_CALLER_SHARE (cap: off)")
    a = p.parse_args()
    run(a.lookups, a.cap, a.connections, a.share)


if __name__ == "__main__":
    main()
