"""RESULTS.md sections of issue 37's parts: the search structures' storage per million
tickets (``storage``) and the engine-native designs beside today's (``native``)."""

from __future__ import annotations

from typing import Any

MB = 1024 * 1024


def storage_section(s: dict[str, Any]) -> list[str]:
    n = s["count"]
    out = [
        "### Search storage per million tickets (issue 37)",
        "",
        f"Measured {s.get('when', '?')} UTC (load {s.get('load', '?')}) on the {n:,}-ticket "
        f"data set and scaled linearly x{1_000_000 // n} "
        "(`python -m bench storage`; every structure grows with the tickets; the vocabulary "
        "in `search_terms` grows slower, so its figure is an upper bound). Bound: our "
        "structures beside the engine's own full-text index at most 0.5 x that index.",
        "",
        "| engine | structure | MB per 1M tickets | x the engine's index |",
        "|---|---|---|---|",
    ]
    for engine in ("sqlite", "postgresql"):
        x = s.get(engine)
        if not x:
            continue
        base = sum(x["sizes"][name] for name in x["native"])
        for name, size in x["sizes"].items():
            out.append(
                f"| {engine} | {name}{' (engine index)' if name in x['native'] else ''} | "
                f"{size * 1_000_000 / n / MB:,.0f} | {size / base:.2f} |"
            )
        ours = sum(x["sizes"].get(name, 0) for name in x["ours"])
        met = ours <= 0.5 * base
        out.append(
            f"| {engine} | **ours beside the index** | **{ours * 1_000_000 / n / MB:,.0f}** | "
            f"**{ours / base:.2f}** ({'met' if met else 'NOT met'}) |"
        )
    return [*out, ""]


def native_section(r: dict[str, Any]) -> list[str]:
    out = [
        "### Engine-native designs beside today's (issue 37, item 3)",
        "",
        f"`python -m bench native`, {r.get('when', '?')} UTC (load {r.get('load', '?')}): "
        "relevance on the sample (the judged queries), latency over bench/search.py's "
        f"{r['queries']} queries on {r['count']:,} tickets (a warm-up, then each query "
        f"{r.get('repeat', '?')} times). Native designs are timed as their SQL alone, "
        "today's as the whole search_tickets_v2 call. Analysis: ANALYSIS.md.",
        "",
        "| engine | design | hit@5 | nDCG@10 | p50 | p95 | same top 10 as today |",
        "|---|---|---|---|---|---|---|",
    ]
    for engine in ("sqlite", "postgresql"):
        for design, x in r.get(engine, {}).items():
            if design == "sizes":
                continue
            rel = x["rel"]
            same = x.get("same_top10")
            out.append(
                f"| {engine} | {design} | {rel['hit5']:.1%} | {rel['ndcg10']:.3f} | "
                f"{x.get('p50_ms', float('nan')):.2f} ms | {x.get('p95_ms', float('nan')):.2f} ms | "
                f"{'-' if same is None else same} |"
            )
    for engine in ("sqlite", "postgresql"):
        for name, size in r.get(engine, {}).get("sizes", {}).items():
            out.append(
                f"| {engine} | size: {name} | {size * 1_000_000 / r['count'] / MB:,.0f} MB per 1M "
                "| | | | |"
            )
    return [*out, ""]
