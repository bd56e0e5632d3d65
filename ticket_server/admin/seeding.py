"""Loading tickets: the committed sample (seed/*.jsonl: tickets, customers, comments,
events), a JSON Lines file of tickets, or the deterministic generators for any count.
All of it in one transaction: on any error or interrupt nothing is kept."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from ticket_server.admin import CommandError
from ticket_server.admin.classification import seed_classification
from ticket_server.admin.conversations import (
    generate_conversations,
    generate_customers,
    record_from_json,
)
from ticket_server.admin.generator import generate_tickets, parse_timestamp
from ticket_server.settings import Settings

log = logging.getLogger(__name__)
SEED_DIR = Path(__file__).resolve().parents[2] / "seed"
SAMPLE_FILE = SEED_DIR / "tickets.jsonl"
SAMPLE_FILES = {name: SEED_DIR / f"{name}.jsonl" for name in ("customers", "comments", "events")}
SAMPLE_COUNT = 2400  # seed/tickets.jsonl is generate_tickets(SAMPLE_COUNT); see seed/README.md
BATCH = 5000


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The tickets of a JSON Lines file; ``CommandError`` naming the file and line for a
    missing file, a line that is not a JSON ticket or one that lacks a required field."""
    try:
        fh = path.open("rb")  # decoded line by line, so a bad byte's line is the one named
    except OSError as exc:
        raise CommandError(
            f"db seed --file {path}: {exc.strerror}; give a JSON Lines file, one ticket per line"
        ) from None
    return _read_tickets(fh, path)


def _read_tickets(fh: BinaryIO, path: Path) -> Iterator[dict[str, Any]]:
    from ticket_server.tickets.models import Ticket

    # The columns a file must give: the others have defaults (version) or are derived
    # (the search columns, from subject and body).
    columns = [
        c
        for c in Ticket.__table__.columns
        if not c.primary_key
        and c.server_default is None
        and c.default is None
        and c.name in LINE_FIELDS  # requester_id, channel: a file's tickets have neither
    ]
    required = [c.name for c in columns if not c.nullable]
    seen: set[str] = set()
    with fh:
        number = 0
        try:
            for number, raw in enumerate(fh, start=1):  # noqa: B007  (read by the except)
                line = raw.decode("utf-8")
                if not line.strip():
                    continue
                ticket = _parse_line(line)
                missing = [name for name in required if name not in ticket]
                if missing:
                    raise ValueError(f"lacks {', '.join(missing)}")
                for column in columns:
                    ticket.setdefault(column.name, None)
                check_ticket(ticket, seen)
                yield ticket
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise CommandError(
                f"db seed --file {path}: line {number} {_reason(exc)}; fix or remove that line "
                "(nothing was written)"
            ) from None


LINE_FIELDS = (
    "id",
    "subject",
    "body",
    "status",
    "priority",
    "owner",
    "queue",
    "customer",
    "created_at",
    "updated_at",
)
"""The keys of one line of a ``db seed --file`` (README: "Loading your own tickets")."""


@lru_cache(maxsize=1)
def _line_rules() -> tuple[dict[str, tuple[str, ...]], dict[str, int | None]]:
    """The allowed values of the enum fields, and the longest text of each text field."""
    from ticket_server.tickets.domain import TicketPriority, TicketStatus
    from ticket_server.tickets.models import Ticket

    choices = {
        "status": tuple(m.value for m in TicketStatus),
        "priority": tuple(m.value for m in TicketPriority),
    }
    lengths = {
        name: getattr(Ticket.__table__.columns[name].type, "length", None)
        for name in ("id", "subject", "body", "owner", "queue", "customer")
    }
    return choices, lengths


def check_ticket(ticket: dict[str, Any], seen: set[str]) -> None:
    """``ValueError`` (starting with "has ") naming the first field of ``ticket`` (one
    line of a file, timestamps parsed) that the database would refuse or store wrongly,
    and what it takes; ``seen`` collects the ids of the lines before it."""
    choices, lengths = _line_rules()
    if len(ticket) != len(LINE_FIELDS):
        extra = sorted(set(ticket) - set(LINE_FIELDS))
        raise ValueError(
            f"has the unknown field {extra[0]!r}; a line holds only {', '.join(LINE_FIELDS)}"
        )
    for field, allowed in choices.items():
        if ticket[field] not in allowed:
            raise ValueError(
                f"has {field} {json.dumps(ticket[field])}; allowed: {', '.join(allowed)}"
            )
    for field, most in lengths.items():
        value = ticket[field]
        if value is None and field == "owner":
            continue
        if not isinstance(value, str) or (field != "body" and not value.strip()):
            raise ValueError(
                f"has {field} {json.dumps(value)}; {field} must be "
                + ("a text" if field == "body" else "a non-empty text")
                + (" or null (unassigned)" if field == "owner" else "")
                + (", e.g. SUP-5000" if field == "id" else "")
            )
        if most is not None and len(value) > most:
            raise ValueError(f"has a {field} of {len(value)} characters; at most {most}")
    if ticket["id"] in seen:
        raise ValueError(f"has id {ticket['id']!r} again (an earlier line holds it)")
    seen.add(ticket["id"])


def _parse_line(line: str) -> dict[str, Any]:
    """One line's ticket, its timestamps parsed; ``ValueError`` saying what is wrong."""
    ticket = json.loads(line)
    if not isinstance(ticket, dict):
        raise ValueError("is not a JSON object")
    for field in ("created_at", "updated_at"):
        if field not in ticket:
            raise ValueError(f"lacks {field}")
        try:
            ticket[field] = parse_timestamp(ticket[field])
        except (ValueError, TypeError, AttributeError):
            raise ValueError(
                f"has {field} {json.dumps(ticket[field])}; give an RFC 3339 time with its "
                "zone, e.g. 2025-03-05T16:56:11Z"
            ) from None
    return ticket


def _reason(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"is not JSON ({exc.msg})"
    text = str(exc)
    if text.startswith(("lacks", "is not ", "has ")):
        return text
    return f"has an unusable value ({text})"


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
    conversations = generate_conversations(SAMPLE_COUNT)
    if name == "comments":
        return (record for _, comments, _ in conversations for record in comments)
    return (record for _, _, events in conversations for record in events)


def _generated(
    count: int,
) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]]:
    """Batches of (tickets, their comments, their events) from the generators."""
    it = generate_conversations(count)
    while chunk := list(islice(it, BATCH)):
        yield (
            [t for t, _, _ in chunk],
            [c for _, cs, _ in chunk for c in cs],
            [e for _, _, es in chunk for e in es],
        )


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
    """Insert tickets into the migrated database at ``settings.database_url``, in one
    transaction: on any error or interrupt none of them are kept.

    Returns how many tickets were added (0 when ``if_empty`` and tickets exist); the
    customers, and the comments and events of the sample or of ``count`` generated
    tickets, come with them (a file of tickets brings no conversation). Raises
    ``CommandError`` (one line) when a ticket's id exists already (naming the first ids),
    for an unreadable ``path`` or line, and ``DatabaseSetupError`` when the schema is
    missing or old. With ``progress``, a progress bar on stderr (rich) counts the
    tickets as batches of ``BATCH`` are written. On SQLite the seeding connection runs
    with ``synchronous=OFF`` and a large page cache; the transaction holds the write
    lock until the end.
    """
    from sqlalchemy import func, insert, select

    from ticket_server.db import create_engine, require_current_schema, sqlite_write_problem
    from ticket_server.tickets.counts import fold_count_deltas
    from ticket_server.tickets.folding import fold_all
    from ticket_server.tickets.models import Customer, Ticket
    from ticket_server.tickets.repository import insert_tickets
    from ticket_server.tickets.search import fold_term_deltas

    def fold_deltas(conn: Any) -> None:  # one writer: nobody waits
        fold_all(conn, fold_term_deltas)  # the search word counts
        fold_all(conn, fold_count_deltas)  # the ticket tallies (tickets.counts)

    problem = sqlite_write_problem(settings.database_url)
    if problem is not None:
        raise CommandError(f"db seed: {problem}")
    await require_current_schema(settings)
    if count is not None and count < 0:
        raise CommandError("db seed --count: give 0 or more tickets")
    from ticket_server.admin.requesters import (
        RequesterPicker,
        generate_queues,
        generate_requesters,
    )
    from ticket_server.tickets.models import Queue, Requester

    batches: Iterable[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]]
    if count is not None:
        batches, customers = _generated(count), generate_customers()
    else:
        records = read_jsonl(Path(path)) if path is not None else sample_tickets()
        batches = ((batch, [], []) for batch in _batches(records))
        customers = list(sample_records("customers"))
    engine = create_engine(settings)
    if settings.sqlite_path is not None:
        from sqlalchemy import event

        @event.listens_for(engine.sync_engine, "connect")
        def _bulk_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA synchronous=OFF")
            cursor.execute("PRAGMA cache_size=-262144")  # 256 MiB
            cursor.close()

    try:
        async with engine.begin() as conn:
            if if_empty and await conn.scalar(select(Ticket.pk).limit(1)) is not None:
                return 0
            # Every organisation the generators name; tickets from a file may name
            # others, which then have no customer record.
            known = set((await conn.scalars(select(Customer.name))).all())
            new_customers = [c for c in customers if c["name"] not in known]
            if new_customers:
                await conn.execute(insert(Customer), new_customers)
            # The sample's queues and requesters (revision 0012), and each generated or
            # sample ticket's requester; a file's tickets name none.
            have = set((await conn.scalars(select(Queue.name))).all())
            queues = [q for q in generate_queues() if q["name"] not in have]
            if queues:
                await conn.execute(insert(Queue), queues)
            requesters = generate_requesters(customers)
            have = set((await conn.scalars(select(Requester.email))).all())
            new_requesters = [r for r in requesters if r["email"] not in have]
            if new_requesters and len(new_requesters) == len(requesters):
                await conn.execute(insert(Requester), new_requesters)
            pick = RequesterPicker(customers, requesters) if path is None and not have else None
            added = 0
            with _progress_bar(progress, count) as advance:
                for tickets, comments, events in batches:
                    if pick is not None:
                        tickets = [{**t, "requester_id": pick(t)} for t in tickets]
                    ids = [t["id"] for t in tickets]
                    taken = (
                        await conn.scalars(
                            select(Ticket.id).where(Ticket.id.in_(ids)).order_by(Ticket.id).limit(4)
                        )
                    ).all()
                    if taken:
                        total = await conn.scalar(select(func.count()).select_from(Ticket))
                        raise CommandError(
                            f"db seed: tickets with these ids exist already: {', '.join(taken[:3])}"
                            f"{', ...' if len(taken) > 3 else ''} (the database holds {total} "
                            "tickets); nothing was written. Use --if-empty to skip a seeded "
                            "database, or load a file with other ids"
                        )
                    added += await conn.run_sync(insert_tickets, tickets, comments, events)
                    await conn.run_sync(fold_deltas)
                    advance(len(tickets))
                    log.debug(
                        f"wrote {added} tickets, kept once all are written",
                        extra={"written": added},
                    )
                if count is None and path is None:
                    for batch in _batches(sample_records("comments")):
                        await conn.run_sync(insert_tickets, [], batch)
                    for batch in _batches(sample_records("events")):
                        await conn.run_sync(insert_tickets, [], (), batch)
                    await conn.run_sync(fold_deltas)
                # The sample's tags and custom fields; on the sample's or generated tickets.
                await conn.run_sync(seed_classification, path is None and added > 0)
                if path is None:  # the sample's and the generator's files
                    from ticket_server.admin.sample_files import add_sample_attachments

                    await conn.run_sync(add_sample_attachments)
        return added
    finally:
        await engine.dispose()


@contextmanager
def _progress_bar(enabled: bool, total: int | None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (tickets done, rate, time left); a no-op if disabled."""
    if not enabled:
        yield lambda _n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn("seeding tickets"), BarColumn(), MofNCompleteColumn()]
    if total:
        columns += [
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
        ]
    else:
        columns += [TimeElapsedColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("seed", total=total)
        yield lambda n: bar.advance(task, n)


async def reindex(settings: Settings) -> tuple[int, int, int]:
    """`db reindex`: give search text to the comments stored without it (written by a
    server older than revision 0007 during a rolling upgrade), write the search postings
    missing for tickets (inserted or changed by a server older than revision 0008), and
    count the tickets again for the counts' tallies (``tickets.counts.recount``); returns
    (comments given search text, tickets looked at, tally groups that were off). Raises
    ``DatabaseSetupError`` when the schema is missing or old."""
    from ticket_server.db import open_repository, require_current_schema
    from ticket_server.tickets.counts import recount

    await require_current_schema(settings)
    repo = open_repository(settings)
    try:
        done = await repo.analyze_unindexed_comments(), await repo.post_unposted_tickets()
        await repo.fold_deltas()
        return (*done, await repo.transaction(recount))
    finally:
        await repo.aclose()
