"""Issue 37, item 3: the engines' own ranked full-text designs beside today's search, on
the same queries and the same data, before choosing.

Designs (each over the analyzer's token columns, ``search_subject``/``search_body``, so
every design sees the same tokens; the query is the analyzer's tokens as an OR):
- ``today``: ``search_tickets_v2`` itself (in-memory client, first page of 10): impact-
  ordered search postings, BM25-style score in SQL (``tickets.search``);
- ``fts5-bm25``: SQLite FTS5 table with a subject and a body column,
  ``ORDER BY bm25(t, 2.0, 1.0)`` (subject weighs twice the body, as ours);
- ``tsvector-ts_rank_cd``: PostgreSQL, ``setweight(subject, 'A') || setweight(body,
  'B')`` (``to_tsvector('simple', ...)``, which keeps positions; ts_rank_cd needs them),
  GIN-indexed, ``ORDER BY ts_rank_cd(v, q) DESC``;
- ``rum``: the same vector in a RUM index (``rum_tsvector_ops``), ``ORDER BY v <=> q``:
  ranked order read from the index (Debian's postgresql-15-rum).

Relevance: hit@5 and nDCG@10 over bench/relevance/judgments.json on the sample (seeded
afresh). Latency: p50/p95 of each design over bench/search.py's queries on the ``--count``
data set (a private copy), each query once as a warm-up then ``--repeat`` times; the
native designs are timed as their SQL alone (no MCP call around it), today's as the
whole tool call, so today's figure carries the call's own cost (the bare server's
figure in RESULTS.md) on top.

    .venv/bin/python -m bench.native [--count 100000] [--engines sqlite,postgresql] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Postgres, log, percentile, seed_database, sqlite_copy, sqlite_url
from bench.relevance.run import judgments, scores, tool_results
from bench.search import PHRASES, QUERIES, RARE_QUERIES
from ticket_server.tickets.analyzer import query_words

LIMIT = 10


def _tokens(query: str) -> list[str]:
    return list(dict.fromkeys(t for t, _ in query_words(query)))


# -- SQLite FTS5 bm25 -----------------------------------------------------------------


def _fts5_build(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute("DROP TABLE IF EXISTS native_fts")
    db.execute(
        "CREATE VIRTUAL TABLE native_fts USING fts5(subject, body, "
        "tokenize = \"unicode61 tokenchars '_'\")"
    )
    db.execute(
        "INSERT INTO native_fts (rowid, subject, body) "
        "SELECT pk, search_subject, search_body FROM tickets"
    )
    db.commit()
    return db


def _fts5_search(db: sqlite3.Connection) -> Callable[[str], list[str]]:
    def search(query: str) -> list[str]:
        words = _tokens(query)
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = db.execute(
            "SELECT t.id FROM (SELECT rowid FROM native_fts WHERE native_fts MATCH ? "
            "ORDER BY bm25(native_fts, 2.0, 1.0) LIMIT ?) f JOIN tickets t ON t.pk = f.rowid",
            (match, LIMIT),
        ).fetchall()
        return [r[0] for r in rows]

    return search


# -- PostgreSQL tsvector / RUM --------------------------------------------------------

_VECTOR = (
    "setweight(to_tsvector('simple', search_subject), 'A') || "
    "setweight(to_tsvector('simple', search_body), 'B')"
)
# a table each, so each design is answered by its own index alone
_PG_BUILD = (
    "CREATE EXTENSION IF NOT EXISTS rum",
    "DROP TABLE IF EXISTS native_gin, native_rum",
    f"CREATE TABLE native_gin AS SELECT pk, id, {_VECTOR} AS v FROM tickets",
    f"CREATE TABLE native_rum AS SELECT pk, id, {_VECTOR} AS v FROM tickets",
    "CREATE INDEX native_gin_v ON native_gin USING gin (v)",
    "CREATE INDEX native_rum_v ON native_rum USING rum (v rum_tsvector_ops)",
    "ANALYZE native_gin",
    "ANALYZE native_rum",
)
_PG_QUERY = {
    "tsvector-ts_rank_cd": "SELECT id FROM native_gin, to_tsquery('simple', :q) q "
    "WHERE v @@ q ORDER BY ts_rank_cd(v, q) DESC LIMIT :n",
    "rum": "SELECT id FROM native_rum WHERE v @@ to_tsquery('simple', :q) "
    "ORDER BY v <=> to_tsquery('simple', :q) LIMIT :n",
}


def _tsquery(query: str) -> str:
    return " | ".join("'" + w.replace("'", "''") + "'" for w in _tokens(query))


async def _pg_designs(url: str) -> tuple[Any, dict[str, Callable[[str], Any]]]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    async with engine.begin() as conn:
        for statement in _PG_BUILD:
            await conn.execute(text(statement))

    def design(name: str) -> Callable[[str], Any]:
        async def search(query: str) -> list[str]:
            q = _tsquery(query)
            if not q:
                return []
            async with engine.connect() as conn:
                rows = await conn.execute(text(_PG_QUERY[name]), {"q": q, "n": LIMIT})
                return [r[0] for r in rows]

        return search

    return engine, {name: design(name) for name in _PG_QUERY}


async def pg_sizes(url: str) -> dict[str, int]:
    """Bytes of each native design's index and its vectors (the column, summed)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return {
                name: int((await conn.execute(text(sql))).scalar_one())
                for name, sql in {
                    "GIN index": "SELECT pg_relation_size('native_gin_v')",
                    "RUM index": "SELECT pg_relation_size('native_rum_v')",
                    "weighted vectors": "SELECT sum(pg_column_size(v)) FROM native_gin",
                }.items()
            }
    finally:
        await engine.dispose()


# -- measuring ------------------------------------------------------------------------


def _relevance(search: Callable[[str], list[str]]) -> dict[str, Any]:
    results = {j["q"]: search(j["q"]) for j in judgments()}
    hit, ndcg, misses = scores(results)
    return {"hit5": hit, "ndcg10": ndcg, "misses": misses, "top10": results}


async def _arelevance(search: Callable[[str], Any]) -> dict[str, Any]:
    results = {j["q"]: await search(j["q"]) for j in judgments()}
    hit, ndcg, misses = scores(results)
    return {"hit5": hit, "ndcg10": ndcg, "misses": misses, "top10": results}


QUERY_SET = (*QUERIES, *RARE_QUERIES, *PHRASES)


async def _times(search: Callable[[str], Any], repeat: int, is_async: bool) -> list[float]:
    out = []
    for query in QUERY_SET:
        for n in range(repeat + 1):
            t = time.perf_counter()
            if is_async:
                await search(query)
            else:
                search(query)
            if n:
                out.append((time.perf_counter() - t) * 1000)
    return out


async def _tool_search(url: str) -> tuple[Any, Callable[[str], Any]]:
    from fastmcp import Client

    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    client = Client(
        build_server(
            Settings(database_url=url, tool_rate_limit="1000000/minute", database_timeout=30.0)
        )
    )
    await client.__aenter__()

    async def search(query: str) -> list[str]:
        result = await client.call_tool("search_tickets_v2", {"query": query, "limit": LIMIT})
        return [t["id"] for t in result.structured_content["tickets"]]

    return client, search


def _line(engine: str, design: str, rel: dict[str, Any], times: list[float] | None) -> None:
    timing = (
        f"p50 {percentile(times, 0.5):7.2f} ms  p95 {percentile(times, 0.95):7.2f} ms"
        if times
        else "not timed"
    )
    log(
        f"{engine:10s} {design:22s} hit@5 {rel['hit5']:6.1%}  nDCG@10 {rel['ndcg10']:.3f}  "
        f"{timing}  misses at 5: {rel['misses']}"
    )


def run_sqlite(tmp: Path, count: int, repeat: int) -> dict[str, Any]:
    sample = Path(tmp) / "sample.db"
    seed_database(sqlite_url(sample), None)
    out: dict[str, Any] = {}
    out["today"] = {"rel": asyncio.run(_arelevance_tool(sqlite_url(sample)))}
    db = _fts5_build(sample)
    out["fts5-bm25"] = {"rel": _relevance(_fts5_search(db))}
    db.close()
    big = sqlite_copy(count, Path(tmp) / "big.db")

    async def timed_today() -> list[float]:
        client, search = await _tool_search(sqlite_url(big))
        try:
            return await _times(search, repeat, True)
        finally:
            await client.__aexit__(None, None, None)

    out["today"]["times"] = asyncio.run(timed_today())
    db = _fts5_build(big)
    out["fts5-bm25"]["times"] = asyncio.run(_times(_fts5_search(db), repeat, False))
    out["sizes"] = {
        "FTS5 index (subject, body)": db.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'native_fts%'"
        ).fetchone()[0]
    }
    db.close()
    return out


async def _arelevance_tool(url: str) -> dict[str, Any]:
    results = await tool_results(url)
    hit, ndcg, misses = scores(results)
    return {"hit5": hit, "ndcg10": ndcg, "misses": misses, "top10": results}


def run_postgres(pg: Postgres, count: int, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    url = pg.empty("bench_native_sample")
    seed_database(url, None)
    out["today"] = {"rel": asyncio.run(_arelevance_tool(url))}

    async def sample() -> None:
        engine, designs = await _pg_designs(url)
        for name, search in designs.items():
            out[name] = {"rel": await _arelevance(search)}
        await engine.dispose()

    asyncio.run(sample())
    big = pg.copy(count, "bench_native")

    async def timed() -> None:
        client, search = await _tool_search(big)
        try:
            out["today"]["times"] = await _times(search, repeat, True)
        finally:
            await client.__aexit__(None, None, None)
        engine, designs = await _pg_designs(big)
        for name, search in designs.items():
            out[name]["times"] = await _times(search, repeat, True)
        await engine.dispose()
        out["sizes"] = await pg_sizes(big)

    asyncio.run(timed())
    return out


def run(
    count: int = 100_000, engines: tuple[str, ...] = ("sqlite", "postgresql"), repeat: int = 5
) -> dict[str, Any]:
    """The figures of each design (relevance on the sample, p50/p95 on ``count``
    tickets), printed and returned as RESULTS.md renders them."""
    results: dict[str, Any] = {
        "count": count,
        "queries": len(QUERY_SET),
        "repeat": repeat,
        "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        if "sqlite" in engines:
            results["sqlite"] = run_sqlite(Path(tmp), count, repeat)
    if "postgresql" in engines:
        pg = Postgres()
        if pg.available():
            pg.start()
            try:
                results["postgresql"] = run_postgres(pg, count, repeat)
            finally:
                pg.stop()
    log(
        f"relevance on the sample ({len(judgments())} queries); latency over {len(QUERY_SET)} "
        f"queries x {repeat} on {count:,} tickets"
    )
    engines_run = [e for e in ("sqlite", "postgresql") if e in results]
    for engine in engines_run:
        for design, figures in results[engine].items():
            if design == "sizes":
                for name, size in figures.items():
                    log(
                        f"{engine:10s} {name:28s} {size * 1_000_000 / count / 2**20:8,.0f} MB per 1M"
                    )
                continue
            _line(engine, design, figures["rel"], figures.get("times"))
        today = results[engine]["today"]["rel"]["top10"]
        for design, figures in results[engine].items():
            if design not in ("today", "sizes"):
                same = sum(figures["rel"]["top10"][q] == today[q] for q in today)
                figures["same_top10"] = same
                log(f"{engine}: {design} gives today's top ten for {same}/{len(today)} queries")
    for engine in engines_run:  # JSON: the figures, not the raw lists
        for design, figures in results[engine].items():
            if design == "sizes":
                continue
            figures["rel"].pop("top10")
            times = figures.pop("times", None)
            if times:
                figures["p50_ms"] = percentile(times, 0.5)
                figures["p95_ms"] = percentile(times, 0.95)
    return results


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.native")
    p.add_argument("--count", type=int, default=100_000)
    p.add_argument("--engines", default="sqlite,postgresql")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    results = run(args.count, tuple(args.engines.split(",")), args.repeat)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
