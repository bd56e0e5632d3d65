"""Operator reports from the audit trail: `ticket-server audit` and `report deprecated`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ticket_server.access.callers import CallerStore

if TYPE_CHECKING:
    from ticket_server.access.models import AuditEvent


def parse_since(text: str) -> datetime:
    """``24h``, ``30m``, ``7d``, ``90s`` ago, or an ISO 8601 time."""
    from datetime import timedelta

    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    if text and text[-1] in units and text[:-1].isdigit():
        return datetime.now(UTC) - timedelta(**{units[text[-1]]: int(text[:-1])})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"--since {text!r}: give a duration like 24h, 30m, 7d or an ISO time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def query(
    store: CallerStore, *, caller: str | None = None, tool: str | None = None,
    since: datetime | None = None, limit: int = 1000,
) -> list[AuditEvent]:
    from sqlalchemy import select

    from ticket_server.access.models import AuditEvent

    stmt = select(AuditEvent)
    if caller:
        stmt = stmt.where(AuditEvent.caller == caller)
    if tool:
        stmt = stmt.where(AuditEvent.tool == tool)
    if since:
        stmt = stmt.where(AuditEvent.time >= since)
    stmt = stmt.order_by(AuditEvent.time.desc(), AuditEvent.pk.desc()).limit(limit)
    async with store.session() as session:
        rows = list((await session.scalars(stmt)).all())
    rows.reverse()
    return rows


async def deprecated_usage(
    store: CallerStore, tools: list[str], since: datetime | None = None
) -> list[tuple[str | None, str, int, datetime]]:
    """Who still calls which of ``tools``: (caller, tool, calls, last call), latest first.

    Counted from the audit trail, so refusals after retirement count too: they are the
    callers that most need telling.
    """
    from sqlalchemy import func, select

    from ticket_server.access.models import AuditEvent

    last = func.max(AuditEvent.time)
    stmt = (
        select(AuditEvent.caller, AuditEvent.tool, func.count(), last)
        .where(AuditEvent.tool.in_(tools))
        .group_by(AuditEvent.caller, AuditEvent.tool)
        .order_by(last.desc())
    )
    if since:
        stmt = stmt.where(AuditEvent.time >= since)
    async with store.session() as session:
        rows = (await session.execute(stmt)).all()
    # SQLite returns max(time) as text: read it through the column's type again.
    out = []
    for caller, tool, count, when in rows:
        if isinstance(when, str):
            when = datetime.fromisoformat(when).replace(tzinfo=UTC)
        out.append((caller, tool, int(count), when))
    return out


async def prune(store: CallerStore, before: datetime) -> int:
    """Delete the audit rows of calls that ended before ``before``; returns how many."""
    from sqlalchemy import delete

    from ticket_server.access.models import AuditEvent

    async with store.session() as session, session.begin():
        done = await session.execute(delete(AuditEvent).where(AuditEvent.time < before))
    return int(done.rowcount or 0)  # type: ignore[attr-defined]
