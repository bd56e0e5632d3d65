"""Operator reports from the audit trail: `ticket-server audit` and `report deprecated`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ticket_server.access.callers import CallerStore

if TYPE_CHECKING:
    from ticket_server.access.models import AuditEvent


def parse_since(text: str) -> datetime:
    """``24h``, ``30m``, ``7d``, ``90s`` ago, or an ISO 8601 time."""
    from datetime import timedelta

    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    wrong = f"--since {text!r}: give a duration like 24h, 30m, 7d or an ISO time"
    if text and text[-1] in units and text[:-1].isascii() and text[:-1].isdigit():
        try:
            return datetime.now(UTC) - timedelta(**{units[text[-1]]: int(text[:-1])})
        except OverflowError as exc:  # before year 1
            raise ValueError(f"{wrong} (this one reaches back before year 1)") from exc
    try:
        moment = datetime.fromisoformat(text)
        # In UTC, as stored: a time whose UTC is outside years 1-9999 fails here, not
        # in the query (where it read as the database not answering).
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(wrong) from exc


async def query(
    store: CallerStore,
    *,
    caller: str | None = None,
    tool: str | None = None,
    since: datetime | None = None,
    limit: int = 1000,
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
        read: object = when  # typed datetime, but text on SQLite
        if isinstance(read, str):
            read = datetime.fromisoformat(read).replace(tzinfo=UTC)
        assert isinstance(read, datetime)
        out.append((caller, tool, int(count), read))
    return out


async def prune(store: CallerStore, before: datetime) -> int:
    """Delete the audit rows of calls that ended before ``before``; returns how many."""
    from sqlalchemy import delete

    from ticket_server.access.models import AuditEvent

    async with store.session() as session, session.begin():
        done = await session.execute(delete(AuditEvent).where(AuditEvent.time < before))
    return int(done.rowcount or 0)  # type: ignore[attr-defined]


async def ticket_story(store: CallerStore, ticket_id: str) -> list[tuple[datetime, str, str, str]]:
    """The story of ``ticket_id``, oldest first: its creation, every comment, every field
    change, and every audited tool call naming it (reads, writes and refusals), as
    (time, who, what, trace id or "")."""
    from sqlalchemy import or_, select

    from ticket_server.access.models import AuditEvent
    from ticket_server.tickets.models import Comment, Ticket, TicketEvent

    story: list[tuple[datetime, str, str, str]] = []
    quoted = json.dumps(ticket_id, ensure_ascii=False)
    named = f'"ticket_id": {quoted}'
    async with store.session() as session:
        ticket = (
            await session.execute(
                select(Ticket.created_at, Ticket.customer, Ticket.queue).where(
                    Ticket.id == ticket_id
                )
            )
        ).first()
        if ticket is not None:
            story.append(
                (
                    ticket.created_at,
                    ticket.customer,
                    f"opened the ticket (queue {ticket.queue})",
                    "",
                )
            )
        for c in (
            await session.scalars(select(Comment).where(Comment.ticket_id == ticket_id))
        ).all():
            kind = "internal note" if c.visibility.value == "internal" else "public reply"
            text = c.body if len(c.body) <= 80 else c.body[:77] + "..."
            story.append(
                (
                    c.created_at,
                    f"{c.author} ({c.author_type.value})",
                    f"{kind} #{c.pk}: {text!r}",
                    "",
                )
            )
        for e in (
            await session.scalars(select(TicketEvent).where(TicketEvent.ticket_id == ticket_id))
        ).all():
            story.append(
                (
                    e.created_at,
                    f"{e.actor} ({e.actor_type.value})",
                    f"{e.field.value}: {e.old_value or '-'} -> {e.new_value or '-'}",
                    "",
                )
            )
        # A call naming the ticket in any argument (ticket_id, a merge's source or target,
        # a bulk change's ticket_ids), or a write whose change is the ticket's (one row per
        # ticket of a bulk change chosen by a search).
        calls = select(AuditEvent).where(
            or_(
                AuditEvent.arguments.contains(quoted, autoescape=True),
                AuditEvent.change.contains(named, autoescape=True),
            )
        )
        for a in (await session.scalars(calls)).all():
            what = f"called {a.tool}: {a.outcome}" + (f" ({a.detail})" if a.detail else "")
            if a.change:
                change = json.loads(a.change)
                extras = [f"version {change.get('version')}"]
                if change.get("idempotency_key"):
                    extras.append(f"key {change['idempotency_key']}")
                extras.append(f"confirmation {change.get('confirmation')}")
                what += " [" + ", ".join(extras) + "]"
            story.append((a.time, f"{a.caller or '-'} via {a.transport}", what, a.trace_id))
    story.sort(key=lambda row: row[0])
    return story
