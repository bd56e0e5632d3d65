"""Storage of the search structures per million tickets (issue 37, item 2), on each engine,
beside the engine's own full-text index over the same token columns.

Measured on the generated data set of ``--count`` tickets (default 100,000) and scaled
linearly to a million (every structure here grows with the tickets and their tokens; the
vocabulary in ``search_terms`` grows slower, so its scaled figure is an upper bound).

- SQLite: the bytes of each table and index from ``dbstat`` (pages in use, whole pages).
- PostgreSQL: ``pg_total_relation_size`` of each table (heap, TOAST and indexes) and
  ``pg_relation_size`` of the GIN index, plus the stored ``tickets.search_vector``
  column (``pg_column_size`` summed: it lives in the tickets' heap).

    .venv/bin/python -m bench.storage [--count 100000] [--engines sqlite,postgresql]

Prints one line per structure: MB at ``--count``, MB per million tickets, and the share
of the engine's own full-text index.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import time
from typing import Any

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench.common import Postgres, log, sqlite_dataset

MB = 1024 * 1024

# what each engine's own full-text index is (the baseline), and our structures beside it
SQLITE_FTS = ("tickets_fts",)  # with its shadow tables tickets_fts_*
SQLITE_OURS = ("ticket_search_postings", "search_terms", "search_term_deltas")
POSTGRES_OURS = SQLITE_OURS


def sqlite_sizes(count: int) -> dict[str, int]:
    con = sqlite3.connect(sqlite_dataset(count))
    try:
        rows = con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        indexes = dict(con.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'"))
    finally:
        con.close()
    out: dict[str, int] = {}
    for name, size in rows:
        table = indexes.get(name, name)  # an index counts with its table
        if table.startswith("tickets_fts"):
            table = "tickets_fts"
        out[table] = out.get(table, 0) + int(size)
    return out


async def _postgres_sizes(url: str) -> dict[str, int]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            out = {
                t: int(
                    (await conn.execute(text(f"SELECT pg_total_relation_size('{t}')"))).scalar_one()
                )
                for t in (*POSTGRES_OURS, "tickets")
            }
            out["GIN ix_tickets_search_vector"] = int(
                (
                    await conn.execute(text("SELECT pg_relation_size('ix_tickets_search_vector')"))
                ).scalar_one()
            )
            out["tickets.search_vector (column)"] = int(
                (
                    await conn.execute(
                        text("SELECT sum(pg_column_size(search_vector)) FROM tickets")
                    )
                ).scalar_one()
            )
    finally:
        await engine.dispose()
    return out


def report(engine: str, count: int, sizes: dict[str, int], native: list[str]) -> dict[str, Any]:
    scale = 1_000_000 / count
    base = sum(sizes[n] for n in native)
    ours = sum(sizes.get(n, 0) for n in SQLITE_OURS)
    log(f"{engine}, {count:,} tickets (scaled x{scale:g} to a million):")
    for name in [*native, *SQLITE_OURS]:
        size = sizes.get(name, 0)
        log(
            f"  {name:<34} {size / MB:9.1f} MB  {size * scale / MB:9.0f} MB per 1M  "
            f"{size / base:6.2f} x the engine's index"
        )
    log(
        f"  engine's own index {base * scale / MB:,.0f} MB per 1M; ours beside it "
        f"{ours * scale / MB:,.0f} MB per 1M ({ours / base:.2f} x; bound: 0.5 x)"
    )
    return {
        "sizes": {n: sizes.get(n, 0) for n in [*native, *SQLITE_OURS]},
        "native": native,
        "ours": list(SQLITE_OURS),
    }


PG_NATIVE = ["GIN ix_tickets_search_vector", "tickets.search_vector (column)"]


def run(
    count: int = 100_000, engines: tuple[str, ...] = ("sqlite", "postgresql")
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "count": count,
        "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load": round(os.getloadavg()[0], 2),
    }
    if "sqlite" in engines:
        out["sqlite"] = report("sqlite", count, sqlite_sizes(count), list(SQLITE_FTS))
    if "postgresql" in engines:
        pg = Postgres()
        if not pg.available():
            log("postgresql: binaries missing, skipped")
            return out
        pg.start()
        try:
            sizes = asyncio.run(_postgres_sizes(pg.dataset(count)))
        finally:
            pg.stop()
        out["postgresql"] = report("postgresql", count, sizes, PG_NATIVE)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.storage")
    p.add_argument("--count", type=int, default=100_000)
    p.add_argument("--engines", default="sqlite,postgresql")
    args = p.parse_args()
    run(args.count, tuple(args.engines.split(",")))


if __name__ == "__main__":
    main()
