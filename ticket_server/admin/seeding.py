"""Loading tickets: the committed sample (seed/*.jsonl: tickets, customers, comments,
events), a JSON Lines file of tickets, or the deterministic generators for any count."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from ticket_server.settings import Settings
from ticket_server.admin.conversations import (
    generate_conversations, generate_customers, record_from_json,
)
from ticket_server.admin.generator import generate_tickets, ticket_from_json

SEED_DIR = Path(__file__).resolve().parents[2] / "seed"
SAMPLE_FILE = SEED_DIR / "tickets.jsonl"
SAMPLE_FILES = {name: SEED_DIR / f"{name}.jsonl" for name in ("customers", "comments", "events")}
SAMPLE_COUNT = 2400  # seed/tickets.jsonl is generate_tickets(SAMPLE_COUNT); see seed/README.md
BATCH = 5000


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield ticket_from_json(line)


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield record_from_json(line)


def sample_tickets() -> Iterator[dict[str, Any]]:
    """The sample set: the committed file, or the generator's identical output when the
    package runs without its source tree."""
    if SAMPLE_FILE.exists():
        return read_jsonl(SAMPLE_FILE)
    return generate_tickets(SAMPLE_COUNT)


def sample_records(name: str) -> Iterator[dict[str, Any]]:
    """The sample's ``customers``, ``comments`` or ``events``: the committed file, or the
    generators' identical output."""
    if SAMPLE_FILES[name].exists():
        return read_records(SAMPLE_FILES[name])
    if name == "customers":
        return iter(generate_customers())
    index = 1 if name == "comments" else 2
    return (record for row in generate_conversations(SAMPLE_COUNT) for record in row[index])


def _generated(count: int) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]]:
    """Batches of (tickets, their comments, their events) from the generators."""
    it = generate_conversations(count)
    while chunk := list(islice(it, BATCH)):
        yield ([t for t, _, _ in chunk], [c for _, cs, _ in chunk for c in cs],
               [e for _, _, es in chunk for e in es])


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

    Returns how many tickets were added (0 when ``if_empty`` and tickets exist); the
    customers, and the comments and events of the sample or of ``count`` generated
    tickets, come with them (a file of tickets brings no conversation). With
    ``progress``, a progress bar on stderr (rich) counts the tickets as batches of
    ``BATCH`` are committed. On SQLite the seeding connection runs with
    ``synchronous=OFF`` and a large page cache (a crash mid-seed can lose the last
    batches, never the schema): 1,000,000 tickets take about two minutes.
    """
    from ticket_server.db import create_engine
    from ticket_server.tickets.repository import TicketRepository

    engine = create_engine(settings)
    if settings.sqlite_path is not None:
        from sqlalchemy import event

        @event.listens_for(engine.sync_engine, "connect")
        def _bulk_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA synchronous=OFF")
            cursor.execute("PRAGMA cache_size=-262144")  # 256 MiB
            cursor.close()

    repo = TicketRepository(engine, timeout=max(settings.database_timeout, 60.0))
    try:
        if if_empty and await repo.count() > 0:
            return 0
        # Every organisation the generators name: tickets from a file may name others,
        # which then have no customer record.
        await repo.add_customers(sample_records("customers") if count is None else generate_customers())
        with _progress_bar(progress, count) as advance:
            added = 0
            if count is not None:
                for tickets, comments, events in _generated(count):
                    n = await repo.add_all(tickets, comments, events)
                    added += n
                    advance(n)
                return added
            for batch in _batches(read_jsonl(Path(path)) if path is not None else sample_tickets()):
                n = await repo.add_all(batch)
                added += n
                advance(n)
            if path is None:
                for name in ("comments", "events"):
                    for batch in _batches(sample_records(name)):
                        await repo.add_all((), **{name: batch})
        return added
    finally:
        await repo.aclose()


@contextmanager
def _progress_bar(enabled: bool, total: int | None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (tickets done, rate, time left); a no-op if disabled."""
    if not enabled:
        yield lambda _n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
        TimeElapsedColumn, TimeRemainingColumn,
    )

    columns = [TextColumn("seeding tickets"), BarColumn(), MofNCompleteColumn()]
    if total:
        columns += [TaskProgressColumn(), TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    else:
        columns += [TimeElapsedColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("seed", total=total)
        yield lambda n: bar.advance(task, n)
