"""`ticket-server queues add | list | deactivate | activate`: the queues tickets belong to
(revision 0012). A queue is never deleted: deactivating it keeps its tickets and stops
new tickets and moves into it. Each mistake is one line (``CommandError``, exit 2)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ticket_server.admin import CommandError

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ticket_server.settings import Settings

T = TypeVar("T")


def _in_transaction(settings: Settings, work: Callable[[Connection], T], *, writes: bool) -> T:
    from ticket_server.db import (
        DatabaseSetupError,
        create_engine,
        require_current_schema,
        sqlite_write_problem,
    )

    problem = sqlite_write_problem(settings.database_url) if writes else None
    if problem is not None:
        raise CommandError(f"queues: {problem}")

    async def main() -> T:
        await require_current_schema(settings)
        engine = create_engine(settings)
        try:
            async with engine.begin() as conn:
                return await conn.run_sync(work)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except DatabaseSetupError as exc:
        raise CommandError(str(exc)) from exc


def _name(name: str) -> str:
    from ticket_server.tickets.directory import QUEUE_NAME

    folded = name.strip().lower()
    if not QUEUE_NAME.match(folded):
        raise CommandError(
            f"queues: queue name {name[:64]!r}: use 1 to 64 of a-z, 0-9, '_' and '-', starting "
            "with a letter or digit"
        )
    return folded


def add(
    settings: Settings,
    name: str,
    display_name: str | None,
    description: str,
    time_zone: str,
) -> None:
    """Add an active queue; refused (one line) for a bad name, a used one, an unknown
    time zone (IANA names, e.g. Europe/Berlin), a display name over 200 characters."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from ticket_server.tickets import directory

    key = _name(name)
    try:
        ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise CommandError(
            f"queues add: unknown time zone {time_zone[:64]!r}; use an IANA name such as "
            "UTC or Europe/Berlin"
        ) from None
    if display_name is not None and not 0 < len(display_name.strip()) <= 200:
        raise CommandError("queues add: --display-name takes 1 to 200 characters")

    def work(conn: Connection) -> directory.QueueInfo:
        found = directory.get_queue(conn, key)
        if found is not None:
            state = "an inactive" if not found.active else "a"
            hint = (
                f"; `ticket-server queues activate {key}` restores it" if not found.active else ""
            )
            raise CommandError(f"queues add: {state} queue named {key!r} exists{hint}")
        return directory.add_queue(
            conn, key, display_name.strip() if display_name else None, description, time_zone
        )

    made = _in_transaction(settings, work, writes=True)
    print(f"added queue {made.name!r} ({made.display_name}, {made.time_zone})", file=sys.stderr)


def list_(settings: Settings, as_json: bool = False) -> None:
    from ticket_server.tickets import directory

    queues = _in_transaction(settings, directory.list_queues, writes=False)
    if as_json:
        for q in queues:
            print(
                json.dumps(
                    {
                        "name": q.name,
                        "display_name": q.display_name,
                        "description": q.description,
                        "time_zone": q.time_zone,
                        "active": q.active,
                    },
                    ensure_ascii=False,
                )
            )
        return
    rows = [["NAME", "DISPLAY NAME", "TIME ZONE", "ACTIVE"]] + [
        [q.name, q.display_name, q.time_zone, "yes" if q.active else "no"] for q in queues
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


def set_active(settings: Settings, name: str, active: bool) -> None:
    """Deactivate (or activate again) a queue; its tickets stay where they are."""
    from ticket_server.tickets import directory

    key = _name(name)
    verb = "activate" if active else "deactivate"

    def work(conn: Connection) -> None:
        found = directory.get_queue(conn, key)
        if found is None:
            known = ", ".join(q.name for q in directory.list_queues(conn)) or "none"
            raise CommandError(f"queues {verb}: no queue named {key!r}; the queues: {known}")
        if found.active == active:
            raise CommandError(f"queues {verb}: queue {key!r} is {verb}d already")
        directory.set_queue_active(conn, key, active)

    _in_transaction(settings, work, writes=True)
    print(f"{verb}d queue {key!r}", file=sys.stderr)
