"""Expand bench/relevance/queries.toml into judgments.json: each query with the ids of the
sample tickets (seed/tickets.jsonl) that answer it.

    .venv/bin/python -m bench.relevance.judge
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parents[1] / "seed" / "tickets.jsonl"
JUDGMENTS = HERE / "judgments.json"


def judge() -> list[dict[str, object]]:
    queries = tomllib.loads((HERE / "queries.toml").read_text("utf-8"))["query"]
    tickets = [json.loads(line) for line in SAMPLE.read_text("utf-8").splitlines()]
    out: list[dict[str, object]] = []
    for q in queries:
        subject = re.compile(q["subject"], re.I) if "subject" in q else None
        text = re.compile(q["text"], re.I) if "text" in q else None
        ids = [
            t["id"]
            for t in tickets
            if (subject is not None and subject.search(t["subject"]))
            or (text is not None and text.search(t["subject"] + "\n" + t["body"]))
        ]
        if not ids:
            raise SystemExit(f"no sample ticket answers {q['q']!r}: fix its rule")
        out.append({"q": q["q"], "kind": q["kind"], "relevant": ids})
    return out


if __name__ == "__main__":
    judged = judge()
    JUDGMENTS.write_text(json.dumps(judged, indent=1, ensure_ascii=False) + "\n", "utf-8")
    for j in judged:
        print(f"{len(j['relevant']):4d}  {j['q']}")
