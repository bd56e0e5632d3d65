"""Loading tickets: the committed sample (seed/tickets.jsonl), a JSON Lines file, or
the deterministic generator for any count."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from ticket_server.settings import Settings
from ticket_server.tickets.generator import generate_tickets, ticket_from_json

SAMPLE_FILE = Path(__file__).resolve().parents[2] / "seed" / "tickets.jsonl"
SAMPLE_COUNT = 2400  # seed/tickets.jsonl is generate_tickets(SAMPLE_COUNT); see seed/README.md
BATCH = 5000


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield ticket_from_json(line)


def sample_tickets() -> Iterator[dict[str, Any]]:
    """The sample set: the committed file, or the generator's identical output when the
    package runs without its source tree."""
    if SAMPLE_FILE.exists():
        return read_jsonl(SAMPLE_FILE)
    return generate_tickets(SAMPLE_COUNT)


def _batches(items: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    it = iter(items)
    while batch := list(islice(it, BATCH)):
        yield batch


async def seed(
    settings: Settings,
    *,
    count: int | None = None,
    path: str | Path | None = None,
    if_empty: bool = False,
    progress: bool = False,
) -> int:
    """Insert tickets into the migrated database at ``settings.database_url``.

    Returns how many were added (0 when ``if_empty`` and tickets exist). A progress
    line on stderr counts batches of ``BATCH`` tickets.
    """
    from ticket_server.db import open_repository

    repo = open_repository(settings)
    try:
        if if_empty and await repo.count() > 0:
            return 0
        if count is not None:
            tickets: Iterable[dict[str, Any]] = generate_tickets(count)
        elif path is not None:
            tickets = read_jsonl(Path(path))
        else:
            tickets = sample_tickets()
        added = 0
        for batch in _batches(tickets):
            added += await repo.add_all(batch)
            if progress:
                total = f"/{count:,}" if count else ""
                print(f"\rseeding: {added:,}{total} tickets", end="", file=sys.stderr, flush=True)
        if progress and added:
            print(file=sys.stderr)
        return added
    finally:
        await repo.aclose()
