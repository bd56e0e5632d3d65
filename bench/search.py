"""Benchmark 2: the whole search_tickets_v2 tool call (in-memory client, all middleware,
first page of 10, no filters, the default caller's scope) p50/p95 over 10k, 100k and 1M
generated tickets on SQLite and PostgreSQL, against the naive baseline: the SQL query
alone, LIKE '%q%' over subject and body (ILIKE on PostgreSQL: both case-insensitive),
newest first, same LIMIT.

    .venv/bin/python -m bench.search [SIZES [ENGINES]]     e.g. 10000 sqlite,postgresql

Each query runs once as a warm-up, then REPEAT times (REPEAT_LARGE times from LARGE
tickets, where the slowest queries take a second or so: the run stays within minutes)."""

from __future__ import annotations

import asyncio
import time

from bench.common import engines_ready, log, percentile, sqlite_dataset, sqlite_url

SIZES = (10_000, 100_000, 1_000_000)
# 1-2 word queries a model writes, from frequent words (in a quarter of all tickets or
# more: the slow tail of relevance ranking) to rare ones.
QUERIES = (
    "customer",
    "account",
    "please",
    "support team",
    "refund",
    "invoice",
    "csv export",
    "settings",
    "pdf",
    "urgent",
    "password reset",
    "fix",
    "sso login",
    "webhook",
    "keystone",
    "trigger",
    "erasure",
    "gullwing",
    "printworks",
    "timeout",
)
# Identifiers a support agent pastes (a request id, an invoice number, an IP address),
# found in one or two tickets at every size (the generator's first tickets): the case
# where the naive baseline cannot stop early and scans every ticket.
RARE_QUERIES = ("req_dc6affc60c81", "INV-93048", "198.51.100.216")
# Phrases as agents type them (from the relevance set, bench/relevance/queries.toml).
PHRASES = (
    "reset my password",
    "can't log in after email change",
    "export timing out",
    "webhook signature failing",
    "pasword reset",
    "INV 20931",
)
REPEAT = 5
LARGE = 1_000_000
REPEAT_LARGE = 3
LIMIT = 10


def repeats(count: int) -> tuple[int, int]:
    """How many times each query runs (after its warm-up): ours, the baseline."""
    return (REPEAT_LARGE, 1) if count >= LARGE else (REPEAT, 3)


async def _measure(url: str, count: int) -> dict[str, object]:
    from fastmcp import Client
    from sqlalchemy import text

    from ticket_server.db import create_engine
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    # Timeouts raised so that a slow query is measured, not cut short (report.py names the
    # queries slower than the default database timeout).
    settings = Settings(
        database_url=url, database_timeout=120, tool_timeout=120, tool_rate_limit="1000000/second"
    )
    repeat, base_repeat = repeats(count)
    ours: dict[str, list[float]] = {}
    base: dict[str, list[float]] = {}
    async with Client(build_server(settings)) as client:
        for q in QUERIES + RARE_QUERIES + PHRASES:
            ours[q] = []
            for i in range(1 + repeat):  # the first is the warm-up
                t = time.perf_counter()
                result = await client.call_tool(
                    "search_tickets_v2", {"query": q, "limit": LIMIT}, raise_on_error=False
                )
                if i:
                    ours[q].append((time.perf_counter() - t) * 1000)
                assert not result.is_error, (q, result.content)
    engine = create_engine(settings)
    like = "LIKE" if engine.dialect.name == "sqlite" else "ILIKE"
    sql = text(
        f"SELECT * FROM tickets WHERE subject {like} :p OR body {like} :p "
        "ORDER BY updated_at DESC, pk DESC LIMIT :n"
    )
    try:
        async with engine.connect() as conn:
            for q in QUERIES + RARE_QUERIES:
                await conn.execute(sql, {"p": f"%{q}%", "n": LIMIT + 1})
                base[q] = []
                for _ in range(base_repeat):
                    t = time.perf_counter()
                    (await conn.execute(sql, {"p": f"%{q}%", "n": LIMIT + 1})).all()
                    base[q].append((time.perf_counter() - t) * 1000)
    finally:
        await engine.dispose()

    def every(times: dict[str, list[float]], queries: tuple[str, ...]) -> list[float]:
        return [t for q in queries for t in times[q]]

    all_ours, all_base = (
        every(ours, QUERIES + RARE_QUERIES + PHRASES),
        every(base, QUERIES + RARE_QUERIES),
    )
    words_ours, words_base = every(ours, QUERIES), every(base, QUERIES)
    result = {
        "p50": percentile(all_ours, 0.5),
        "p95": percentile(all_ours, 0.95),
        "max": max(all_ours),
        "base_p50": percentile(all_base, 0.5),
        "base_p95": percentile(all_base, 0.95),
        "samples": len(all_ours),
        "base_samples": len(all_base),
        "repeat": repeat,
        "base_repeat": base_repeat,
        # the 20 word queries alone (without the rare identifiers), for comparison
        "words_p95": percentile(words_ours, 0.95),
        "words_base_p95": percentile(words_base, 0.95),
        "per_query_ms": {
            q: [percentile(ours[q], 0.5), percentile(base[q], 0.5) if q in base else None]
            for q in ours
        },
    }
    result["ratio_p95"] = result["base_p95"] / result["p95"]
    result["ratio_p50"] = result["base_p50"] / result["p50"]
    return result


def run(
    sizes: tuple[int, ...] = SIZES, engines: tuple[str, ...] = ("sqlite", "postgresql")
) -> dict[str, object]:
    out: dict[str, object] = {}
    with engines_ready(engines, "search") as ready:
        for engine, pg in ready:
            for n in sizes:
                url = sqlite_url(sqlite_dataset(n)) if pg is None else pg.dataset(n)
                log(
                    f"search: {engine} {n:,} tickets, each query {repeats(n)[0]} time(s) after a warm-up "
                    f"(baseline {repeats(n)[1]}) ..."
                )
                r = asyncio.run(_measure(url, n))
                log(
                    f"  ours p50 {r['p50']:.2f} p95 {r['p95']:.2f} ms | baseline p50 {r['base_p50']:.1f} "
                    f"p95 {r['base_p95']:.1f} ms | {r['ratio_p95']:.0f}x | words only: p95 "
                    f"{r['words_p95']:.2f} ms, baseline {r['words_base_p95']:.1f} ms"
                )
                out[f"{engine}/{n}"] = r
    return out


if __name__ == "__main__":
    import json
    import sys

    sizes = tuple(int(s) for s in sys.argv[1].split(",")) if len(sys.argv) > 1 else SIZES
    engines = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("sqlite", "postgresql")
    print(json.dumps(run(sizes, engines), indent=2))
