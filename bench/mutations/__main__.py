"""Deliberate breakage, by hand (never in CI, like `make bench`):

    .venv/bin/python -m bench.mutations                 # every entry of mutations.toml
    .venv/bin/python -m bench.mutations ID [ID ...]     # some entries
    .venv/bin/python -m bench.mutations --list          # the entries, nothing run

Each entry of ``bench/mutations/mutations.toml`` names a file, a code fragment found in
it exactly once (``pattern``), what replaces it, and the tests expected to catch the
change. The tree (without .git, .venv, .cache) is copied once into a scratch folder; the
entries' tests first run there unchanged (they must pass, or a "caught" would mean
nothing); then each mutation is applied in that copy, its tests alone run, and the file
is restored. A mutation is **caught** when its tests fail (or time out), **survived**
when they pass. A pattern found zero times or more than once stops the run before any
test (exit status 2): the code moved, so the entry must be updated, never skipped.

Without ids the report is written to ``bench/mutations/REPORT.md`` (``--no-write``: print
only). Exit status: 0 when every mutation was caught, 1 when one survived or the
unchanged tests failed, 2 when an entry no longer applies.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
LIST = HERE / "mutations.toml"
REPORT = HERE / "REPORT.md"
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", ".cache", ".pytest_cache", "__pycache__", "*.egg-info", "*.db*"
)
PYTEST = ["-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-x", "-n", "0"]
TIMEOUT = 900


@dataclass(frozen=True)
class Mutation:
    id: str
    what: str
    file: str
    pattern: str
    replacement: str
    tests: tuple[str, ...]
    found: str  # "caught" | "survived": what the first breakage pass found (issue 40)


def load(path: Path = LIST) -> list[Mutation]:
    entries = tomllib.loads(path.read_text("utf-8"))["mutation"]
    mutations = [
        Mutation(
            id=e["id"],
            what=e["what"],
            file=e["file"],
            pattern=e["pattern"],
            replacement=e["replacement"],
            tests=tuple(e["tests"]),
            found=e.get("found", "new"),
        )
        for e in entries
    ]
    ids = [m.id for m in mutations]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise SystemExit(f"mutations.toml: duplicate ids {', '.join(duplicates)}")
    return mutations


def stale(mutations: list[Mutation], root: Path) -> list[str]:
    """Why each entry that no longer applies to the tree at ``root`` does not."""
    problems = []
    for m in mutations:
        path = root / m.file
        if not path.is_file():
            problems.append(f"{m.id}: {m.file} does not exist")
            continue
        count = path.read_text("utf-8").count(m.pattern)
        if count != 1:
            problems.append(f"{m.id}: its pattern occurs {count} times in {m.file} (must be 1)")
        elif m.pattern == m.replacement:
            problems.append(f"{m.id}: the replacement equals the pattern")
        for test in m.tests:
            if not (root / test.split("::")[0]).is_file():
                problems.append(f"{m.id}: no test file {test.split('::')[0]}")
    return problems


def run_tests(scratch: Path, tests: tuple[str, ...] | list[str]) -> tuple[bool, float, str]:
    """(passed, seconds, the output's tail) of pytest on ``tests`` in ``scratch``."""
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, *PYTEST, *tests],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - started, f"timed out after {TIMEOUT} s"
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
    return done.returncode == 0, time.monotonic() - started, tail


def imports_the_copy(scratch: Path) -> bool:
    """Whether a Python started as the tests are imports ``ticket_server`` from the
    copy (not from the editable install of the working tree)."""
    env = {**os.environ, "PYTHONPATH": str(scratch)}
    out = subprocess.run(
        [sys.executable, "-c", "import ticket_server; print(ticket_server.__file__)"],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(out).resolve().is_relative_to(scratch.resolve())


def tree_state() -> str:
    """The commit of the tree as it is now, and whether it has uncommitted changes: taken
    when the tree is copied, since the report is written minutes later."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "ticket_server", "tests", "bench/mutations"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"commit {commit}" + (" with uncommitted changes" if dirty else "")


def report(
    results: list[tuple[Mutation, str, float]],
    baseline: tuple[bool, float],
    started: datetime,
    tree: str,
) -> str:
    caught = sum(outcome.startswith("caught") for _, outcome, _ in results)
    lines = [
        "# Mutation report",
        "",
        "Written by `.venv/bin/python -m bench.mutations` (by hand, never in CI); the entries",
        "are `bench/mutations/mutations.toml`.",
        "",
        f"- run: {started:%Y-%m-%d %H:%M} UTC, {tree}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        f"- unchanged tree: the entries' tests {'pass' if baseline[0] else 'FAIL'} "
        f"({baseline[1]:.0f} s)",
        f"- **{caught} of {len(results)} caught, {len(results) - caught} survived**",
        "",
        "| id | file | first pass (issue 40) | now | s | tests |",
        "|---|---|---|---|---|---|",
    ]
    for m, outcome, seconds in results:
        tests = "<br>".join(f"`{t}`" for t in m.tests)
        lines.append(
            f"| {m.id} | `{m.file}` | {m.found} | **{outcome}** | {seconds:.0f} | {tests} |"
        )
    lines += ["", "## What each mutation does", ""]
    lines += [f"- **{m.id}**: {m.what}" for m, _, _ in results]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.mutations", description=__doc__)
    p.add_argument("ids", nargs="*", help="entries to run (default: all)")
    p.add_argument("--list", action="store_true", help="print the entries and stop")
    p.add_argument("--no-write", action="store_true", help="leave REPORT.md alone")
    args = p.parse_args()
    mutations = load()
    if args.ids:
        unknown = set(args.ids) - {m.id for m in mutations}
        if unknown:
            print(f"unknown ids: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        mutations = [m for m in mutations if m.id in args.ids]
    if args.list:
        for m in mutations:
            print(f"{m.id:40} {m.file}")
        return 0
    problems = stale(mutations, ROOT)
    if problems:
        print("entries that no longer apply (update them):", *problems, sep="\n  ", file=sys.stderr)
        return 2
    started, tree = datetime.now(UTC), tree_state()
    with tempfile.TemporaryDirectory(prefix="mutations-") as tmp:
        scratch = Path(tmp) / "tree"
        shutil.copytree(ROOT, scratch, ignore=COPY_IGNORE)
        if (ROOT / ".cache").is_dir():  # the pinned Node.js and MCP tools some tests drive
            (scratch / ".cache").symlink_to(ROOT / ".cache")
        if not imports_the_copy(scratch):
            print("the scratch copy's ticket_server is not the one imported", file=sys.stderr)
            return 2
        every_test = list(dict.fromkeys(t for m in mutations for t in m.tests))
        print(f"unchanged tree: {len(every_test)} test selections ...", flush=True)
        passed, baseline_seconds, tail = run_tests(scratch, every_test)
        print(f"  {'pass' if passed else 'FAIL'} ({baseline_seconds:.0f} s)", flush=True)
        if not passed:
            print(tail, file=sys.stderr)
        results: list[tuple[Mutation, str, float]] = []
        for m in mutations:
            path = scratch / m.file
            original = path.read_text("utf-8")
            path.write_text(original.replace(m.pattern, m.replacement), "utf-8")
            try:
                survived, seconds, tail = run_tests(scratch, m.tests)
            finally:
                path.write_text(original, "utf-8")
            outcome = "survived" if survived else "caught"
            if "timed out" in tail:
                outcome = "caught (timeout)"
            results.append((m, outcome, seconds))
            print(f"{outcome:16} {seconds:5.0f} s  {m.id}", flush=True)
            if survived:
                print("  " + tail.replace("\n", "\n  "), flush=True)
    text = report(results, (passed, baseline_seconds), started, tree)
    if not args.ids and not args.no_write:
        REPORT.write_text(text, "utf-8")
        print(f"wrote {REPORT.relative_to(ROOT)}")
    survivors = [m.id for m, outcome, _ in results if outcome == "survived"]
    print(f"{len(results) - len(survivors)} caught, {len(survivors)} survived", flush=True)
    return 0 if passed and not survivors else 1


if __name__ == "__main__":
    raise SystemExit(main())
