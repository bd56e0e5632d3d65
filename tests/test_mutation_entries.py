"""The deliberate breakages of ``bench/mutations/mutations.toml`` (run by hand with
``make mutations``) still apply to today's code: each pattern is found exactly once in
its file, and the mutated file still parses, so that a "caught" means a test saw the
breakage and not a syntax error. Code that moves breaks this test, not the next
mutation run weeks later."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_mutation_applies_once_and_parses() -> None:
    entries = tomllib.loads((ROOT / "bench/mutations/mutations.toml").read_text())["mutation"]
    assert len(entries) >= 30
    stale: list[str] = []
    for entry in entries:
        source = (ROOT / entry["file"]).read_text()
        found = source.count(entry["pattern"])
        if found != 1:
            stale.append(f"{entry['id']}: pattern found {found} times in {entry['file']}")
            continue
        ast.parse(source.replace(entry["pattern"], entry["replacement"]), entry["file"])
    assert stale == []
