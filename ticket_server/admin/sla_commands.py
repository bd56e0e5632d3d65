"""Operator commands for SLAs: `sla load FILE`, `sla show`, and `report sla`."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ticket_server.admin import CommandError
from ticket_server.settings import Settings

if TYPE_CHECKING:
    from ticket_server.tickets.repository import TicketRepository

T = TypeVar("T")

WHOLE_TABLE_TIMEOUT = 3600.0
"""Seconds `sla load` and `sla recompute` may take: they derive every ticket's SLA
columns in one transaction (about 0.3 ms a ticket on a 2-core machine, some 5 minutes
per million), during which other writers wait."""


def _on_repository(settings: Settings, work: Callable[[TicketRepository], Awaitable[T]]) -> T:
    from ticket_server.db import open_repository, require_current_schema
    from ticket_server.tickets.domain import DatabaseUnavailable

    async def main() -> T:
        await require_current_schema(settings)
        repo = open_repository(settings)
        try:
            return await work(repo)
        except DatabaseUnavailable as exc:
            raise CommandError("the ticket database did not answer; nothing was changed") from exc
        finally:
            await repo.aclose()

    from ticket_server.db import DatabaseSetupError

    try:
        return asyncio.run(main())
    except DatabaseSetupError as exc:
        raise CommandError(str(exc)) from exc


def _whole_table(settings: Settings) -> Settings:
    timeout = max(settings.database_timeout, WHOLE_TABLE_TIMEOUT)
    return settings.model_copy(update={"database_timeout": timeout})


async def _rewriting_every_ticket(repo: TicketRepository, work: Callable[[Any], T]) -> T:
    """``work`` in one transaction, then the planner's view of the rewritten table brought
    up to date (``TicketRepository.analyze_tickets``)."""
    done = await repo.transaction(work)
    await repo.analyze_tickets()
    return done


def load(settings: Settings, path: Path) -> None:
    """Replace the stored SLA policy by the one in ``path`` (TOML or JSON), in one
    transaction: a file with any error changes nothing."""
    from ticket_server.db import sqlite_write_problem
    from ticket_server.tickets.sla import DEFAULT_QUEUE, parse_policy
    from ticket_server.tickets.sla_store import replace_policy

    try:
        policy = parse_policy(path)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise CommandError(f"SLA policy not loaded: {exc}") from exc
    problem = sqlite_write_problem(settings.database_url)
    if problem is not None:
        raise CommandError(problem)

    async def replace(repo: TicketRepository) -> tuple[int, int]:
        # A queue no ticket is in and `queues add` never made (a misspelt name) would
        # load without a word and apply to no ticket.
        known = await repo.queues()
        unknown = sorted(set(policy.queues) - set(known) - {DEFAULT_QUEUE})
        if unknown:
            raise CommandError(
                f"SLA policy not loaded: {path.name}: no queue named "
                f"{', '.join(map(repr, unknown))}; the queues are {', '.join(known) or 'none'} "
                '("*" for every queue without an entry; `ticket-server queues add` makes one)'
            )
        return await _rewriting_every_ticket(repo, lambda conn: replace_policy(conn, policy))

    calendars, targets = _on_repository(_whole_table(settings), replace)
    print(
        f"SLA policy loaded: {calendars} queue calendars, {targets} targets "
        "(every ticket's SLA state derived again under it)",
        file=sys.stderr,
    )


def recompute(settings: Settings) -> None:
    """Derive every ticket's stored SLA columns again (``sla_store.refresh_all``), in
    one transaction: after a replica of an older version wrote tickets."""
    from ticket_server.db import sqlite_write_problem
    from ticket_server.tickets.sla_store import refresh_all

    problem = sqlite_write_problem(settings.database_url)
    if problem is not None:
        raise CommandError(problem)
    written = _on_repository(
        _whole_table(settings), lambda repo: _rewriting_every_ticket(repo, refresh_all)
    )
    print(f"SLA state derived again for {written} tickets", file=sys.stderr)


def show(settings: Settings) -> None:
    """The stored policy, as JSON that `sla load` takes back."""
    from ticket_server.tickets.sla_store import load_policy

    policy = _on_repository(settings, lambda repo: repo.read(load_policy))
    print(json.dumps(policy.model_dump(mode="json"), indent=2))


def report(
    settings: Settings, queue: str | None, since: str, as_json: bool, now: datetime | None = None
) -> None:
    """Per priority, of the tickets created since ``since`` (in ``queue``): how many have
    a target, met or breached each, and the median first response in business minutes."""
    from ticket_server.admin.reports import parse_since
    from ticket_server.tickets.sla_store import report_rows

    try:
        moment = parse_since(since)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    at = now or datetime.now(UTC)

    async def read(repo: TicketRepository) -> tuple[str | None, list[tuple[Any, Any]]]:
        from ticket_server.tickets.search import resolve_queue

        names = None
        if queue is not None and queue.strip():  # any case, as the tools take it
            known = await repo.queues()
            names = resolve_queue(queue, known)
            if names is None:
                raise CommandError(
                    f"report sla --queue {queue!r}: there is no such queue; the queues are "
                    f"{', '.join(known) or 'none'}"
                )
        rows = await repo.read(lambda conn: report_rows(conn, names, moment, at))
        return (names[0] if names else None), rows

    name, rows = _on_repository(settings, read)
    lines = summarise(rows)
    if as_json:
        print(json.dumps({"queue": name, "since": moment.isoformat(), "priorities": lines}))
        return
    _table(lines, name, moment)


def summarise(rows: list[tuple[Any, Any]]) -> list[dict[str, Any]]:
    """One line per priority (urgent first) from (ticket, SLA state) pairs."""
    from ticket_server.tickets.domain import TicketPriority

    by: dict[str, list[Any]] = defaultdict(list)
    for row, state in rows:
        by[str(getattr(row.priority, "value", row.priority))].append(state)
    out = []
    for priority in reversed(list(TicketPriority)):
        states = by.get(priority.value, [])
        if not states:
            continue
        line: dict[str, Any] = {"priority": priority.value, "tickets": len(states)}
        line["without_sla"] = sum(1 for s in states if not s.covered)
        for name in ("first_response", "resolution"):
            clocks = [getattr(s, name) for s in states if getattr(s, name) is not None]
            line[f"{name}_met"] = sum(1 for c in clocks if c.met_at is not None and not c.breached)
            line[f"{name}_breached"] = sum(1 for c in clocks if c.breached)
            line[f"{name}_pending"] = sum(1 for c in clocks if c.met_at is None and not c.breached)
        taken = [
            s.first_response.target_minutes - s.first_response.business_minutes_left
            for s in states
            if s.first_response is not None and s.first_response.met_at is not None
        ]
        line["median_first_response_minutes"] = round(statistics.median(taken)) if taken else None
        out.append(line)
    return out


def _table(lines: list[dict[str, Any]], queue: str | None, since: datetime) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"SLA of {queue or 'every queue'}, tickets created since "
        f"{since.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
        caption="FR: first response, res: resolution; late: breached; open: not met, not "
        "breached yet; FR median in business minutes; no SLA: no target applies",
    )
    heads = (
        ("priority", "priority"),
        ("n", "tickets"),
        ("FR met", "first_response_met"),
        ("FR late", "first_response_breached"),
        ("FR open", "first_response_pending"),
        ("res met", "resolution_met"),
        ("res late", "resolution_breached"),
        ("res open", "resolution_pending"),
        ("FR median", "median_first_response_minutes"),
        ("no SLA", "without_sla"),
    )
    for head, _ in heads:
        table.add_column(
            head, justify="left" if head == "priority" else "right", no_wrap=head == "priority"
        )
    for line in lines:
        table.add_row(*("-" if line[key] is None else str(line[key]) for _, key in heads))
    Console().print(table)
    if not lines:
        print("no tickets created in that time", file=sys.stderr)
