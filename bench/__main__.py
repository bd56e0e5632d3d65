"""Run the benchmarks and write bench/RESULTS.md:  .venv/bin/python -m bench [NAME ...]

NAME: schema, coldstart, calls, memory, search, fullread, relevance, storage, native
(default: all). Options:
  --sizes 10000,100000,1000000   data set sizes of search
  --fullread-sizes N[,N]         data set sizes of fullread (default: the largest of --sizes)
  --engines sqlite,postgresql    engines of search, fullread, relevance, storage, native
  --cost-count N                 data set size of storage and native (default 100000)
  --no-write                     print the results, leave RESULTS.md alone
Raw results also go to .cache/bench/results.json (each part's entry replaced when it runs);
RESULTS.md is rendered from all of it."""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from bench import calls, coldstart, full_read, memory, native, schema, search, storage
from bench.common import CACHE, ROOT, log, machine
from bench.relevance import run as relevance
from bench.report import render

ALL = (
    "schema",
    "coldstart",
    "calls",
    "memory",
    "search",
    "fullread",
    "relevance",
    "storage",
    "native",
)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("names", nargs="*", help=f"any of {', '.join(ALL)} (default: all)")
    p.add_argument("--sizes", default="10000,100000,1000000", help="search's data set sizes")
    p.add_argument(
        "--fullread-sizes", default=None, help="fullread's (default: the largest of --sizes)"
    )
    p.add_argument(
        "--engines", default="sqlite,postgresql", help="of search, fullread and relevance"
    )
    p.add_argument("--cost-count", type=int, default=100_000, help="storage's and native's")
    p.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md alone")
    args = p.parse_args()
    names = args.names or list(ALL)
    unknown = set(names) - set(ALL)
    if unknown:
        p.error(f"unknown benchmark {', '.join(sorted(unknown))}; any of {', '.join(ALL)}")
    sizes = tuple(int(s) for s in args.sizes.split(","))
    engines = tuple(args.engines.split(","))
    fullread_sizes = (
        tuple(int(s) for s in args.fullread_sizes.split(","))
        if args.fullread_sizes
        else (max(sizes),)
    )
    CACHE.mkdir(parents=True, exist_ok=True)
    raw_path = CACHE / "results.json"
    results = json.loads(raw_path.read_text()) if raw_path.exists() else {}
    results.pop("note", None)  # a hand-written note describes one run only
    results["machine"] = machine()
    started = time.perf_counter()
    for name in names:
        t = time.perf_counter()
        results.setdefault("load", {})[name] = round(os.getloadavg()[0], 2)
        if name == "search":
            results["search"] = search.run(sizes, engines)
        elif name == "fullread":
            results["fullread"] = full_read.run(fullread_sizes, engines)
        elif name == "relevance":
            results["relevance"] = relevance.run(engines)
        elif name == "storage":
            results["storage"] = storage.run(args.cost_count, engines)
        elif name == "native":
            results["native"] = native.run(args.cost_count, engines)
        else:
            results[name] = {
                "calls": calls,
                "coldstart": coldstart,
                "schema": schema,
                "memory": memory,
            }[name].run()
        results.setdefault("when", {})[name] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
        raw_path.write_text(json.dumps(results, indent=2))  # each part kept should a later one fail
        log(f"[{name}: {time.perf_counter() - t:.0f} s]")
    log(f"all done in {time.perf_counter() - started:.0f} s; raw results in {raw_path}")
    if not args.no_write:
        (ROOT / "bench" / "RESULTS.md").write_text(render(results))
        log("wrote bench/RESULTS.md")


if __name__ == "__main__":
    main()
