"""Relevance of search_tickets_v2 on the sample, per engine, beside the anchor.

    .venv/bin/python -m bench.relevance.run [--engines sqlite,postgresql]

The anchor is the simplest alternative, computed in the same run on the same tickets:
an SQLite FTS5 table with the ``porter unicode61`` tokenizer over subject and body, the
query's words (Unicode letters and digits) as an OR of quoted terms, ``ORDER BY bm25``.
Our figures come from the real tool (in-memory fastmcp Client, first page of 10, no
filters). Metrics: hit@5 (a relevant ticket among the first five) and nDCG@10 (binary
relevance; the ideal ranking puts min(10, relevant) relevant tickets first), averaged
over the queries of bench/relevance/judgments.json (see judge.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
JUDGMENTS = HERE / "judgments.json"
SAMPLE = HERE.parents[1] / "seed" / "tickets.jsonl"


def judgments() -> list[dict]:
    return json.loads(JUDGMENTS.read_text("utf-8"))


def hit_at_5(ranked: list[str], relevant: set[str]) -> float:
    return 1.0 if any(t in relevant for t in ranked[:5]) else 0.0


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, t in enumerate(ranked[:10]) if t in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal


def anchor() -> dict[str, list[str]]:
    """Top-10 ids per query from plain FTS5 porter, OR of the words, bm25."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, subject, body, tokenize='porter unicode61')")
    with SAMPLE.open(encoding="utf-8") as f:
        db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                       ((r["id"], r["subject"], r["body"]) for r in map(json.loads, f)))
    out = {}
    for j in judgments():
        words = re.findall(r"[^\W_]+", j["q"])
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = db.execute("SELECT id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (match,)).fetchall()
        out[j["q"]] = [r[0] for r in rows]
    return out


async def tool_results(url: str) -> dict[str, list[str]]:
    """Top-10 ids per query from search_tickets_v2 on a seeded database at ``url``."""
    from fastmcp import Client

    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    server = build_server(Settings(database_url=url, tool_rate_limit="1000000/minute"))
    out = {}
    async with Client(server) as client:
        for j in judgments():
            result = await client.call_tool("search_tickets_v2", {"query": j["q"], "limit": 10})
            out[j["q"]] = [t["id"] for t in result.structured_content["tickets"]]
    return out


def scores(results: dict[str, list[str]]) -> tuple[float, float, list[str]]:
    js = judgments()
    hits = [hit_at_5(results[j["q"]], set(j["relevant"])) for j in js]
    ndcg = [ndcg_at_10(results[j["q"]], set(j["relevant"])) for j in js]
    misses = [j["q"] for j, h in zip(js, hits) if not h]
    return sum(hits) / len(js), sum(ndcg) / len(js), misses


def _seeded(url: str) -> None:
    from ticket_server import db
    from ticket_server.admin.seeding import seed
    from ticket_server.settings import Settings

    db.upgrade(url)
    asyncio.run(seed(Settings(database_url=url)))


def engines(names: list[str]) -> dict[str, Callable[[], Awaitable[dict[str, list[str]]]]]:
    runs: dict[str, Callable[[], Awaitable[dict[str, list[str]]]]] = {}
    if "sqlite" in names:
        path = Path(tempfile.mkdtemp(prefix="relevance-")) / "tickets.db"
        url = f"sqlite+aiosqlite:///{path}"
        _seeded(url)
        runs["sqlite"] = lambda: tool_results(url)
    if "postgresql" in names:
        from tests.postgres import start_private_server

        pg = start_private_server()
        pg.psql("CREATE DATABASE relevance")
        url_pg = pg.url("relevance")
        _seeded(url_pg)
        runs["postgresql"] = lambda: tool_results(url_pg)
        runs["_pg_server"] = pg  # type: ignore[assignment]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engines", default="sqlite,postgresql")
    args = parser.parse_args()
    js = judgments()
    results = {"anchor (FTS5 porter, OR, bm25)": anchor()}
    runs = engines(args.engines.split(","))
    pg = runs.pop("_pg_server", None)
    try:
        for name, run in runs.items():
            results[name] = asyncio.run(run())
    finally:
        if pg is not None:
            pg.remove()  # type: ignore[attr-defined]
    print(f"{len(js)} queries, sample of {sum(1 for _ in SAMPLE.open())} tickets")
    print(f"{'engine':34} {'hit@5':>7} {'nDCG@10':>8}")
    for name, res in results.items():
        hit, ndcg, _ = scores(res)
        print(f"{name:34} {hit:7.1%} {ndcg:8.3f}")
    for name, res in results.items():
        print(f"misses at 5, {name}: {scores(res)[2]}")
    if "sqlite" in results and "postgresql" in results:
        same = sum(results["sqlite"][j["q"]] == results["postgresql"][j["q"]] for j in js)
        print(f"same top-10 ids on SQLite and PostgreSQL: {same}/{len(js)} queries")


if __name__ == "__main__":
    main()
