"""Relevance of search_tickets_v2 on the sample, per engine, beside the anchor.

    .venv/bin/python -m bench.relevance.run [--engines sqlite,postgresql]    (or: python -m bench relevance)

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
    db.execute(
        "CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, subject, body, tokenize='porter unicode61')"
    )
    with SAMPLE.open(encoding="utf-8") as f:
        db.executemany(
            "INSERT INTO t VALUES (?, ?, ?)",
            ((r["id"], r["subject"], r["body"]) for r in map(json.loads, f)),
        )
    out = {}
    for j in judgments():
        words = re.findall(r"[^\W_]+", j["q"])
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = db.execute(
            "SELECT id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (match,)
        ).fetchall()
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


def scores(
    results: dict[str, list[str]], kind: str | None = None
) -> tuple[float, float, list[str]]:
    """hit@5, nDCG@10 and the queries missed at 5, over the judged queries (``kind``:
    those of that kind only)."""
    js = [j for j in judgments() if kind is None or j["kind"] == kind]
    hits = [hit_at_5(results[j["q"]], set(j["relevant"])) for j in js]
    ndcg = [ndcg_at_10(results[j["q"]], set(j["relevant"])) for j in js]
    misses = [j["q"] for j, h in zip(js, hits) if not h]
    return sum(hits) / len(js), sum(ndcg) / len(js), misses


def run(engines: tuple[str, ...] = ("sqlite", "postgresql")) -> dict[str, object]:
    """hit@5, nDCG@10 and the queries missed at 5 of the anchor and of each engine, and
    how many queries get the same top-10 ids on both engines. Each engine's database is
    seeded afresh with the sample (a temporary SQLite file; a database in the benchmark's
    PostgreSQL cluster, bench.common), so the tickets are always the judged ones."""
    from bench.common import engines_ready, log, seed_database, sqlite_url

    js = judgments()
    ranked = {"anchor": anchor()}
    with tempfile.TemporaryDirectory() as tmp, engines_ready(engines, "relevance") as ready:
        for engine, pg in ready:
            url = sqlite_url(Path(tmp) / "sample.db") if pg is None else pg.empty("bench_relevance")
            seed_database(url, None)
            ranked[engine] = asyncio.run(tool_results(url))
    out: dict[str, object] = {
        "queries": len(js),
        "sample": sum(1 for _ in SAMPLE.open(encoding="utf-8")),
    }
    for name, res in ranked.items():
        hit, ndcg, misses = scores(res)
        para_hit, para_ndcg, _ = scores(res, "paraphrase")
        out[name] = {
            "hit5": hit,
            "ndcg10": ndcg,
            "misses": misses,
            "paraphrase_hit5": para_hit,
            "paraphrase_ndcg10": para_ndcg,
        }
        log(
            f"relevance {name:10s} hit@5 {hit:6.1%}  nDCG@10 {ndcg:.3f}  "
            f"(paraphrases: {para_hit:6.1%} / {para_ndcg:.3f})  misses at 5: {misses}"
        )
    if "sqlite" in ranked and "postgresql" in ranked:
        out["same_top10"] = sum(
            ranked["sqlite"][j["q"]] == ranked["postgresql"][j["q"]] for j in js
        )
        log(
            f"relevance: same top-10 ids on SQLite and PostgreSQL for {out['same_top10']}/{len(js)} queries"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relevance.run")
    parser.add_argument("--engines", default="sqlite,postgresql")
    run(tuple(parser.parse_args().engines.split(",")))


if __name__ == "__main__":
    main()
