"""Links between tickets (``ticket_links``): typed relations, read both ways.

A link is stored once, from one ticket's side, as a ``LinkType`` (``duplicate_of``,
``related``, ``caused_by``); the other ticket reads it as the inverse
(``INVERSE_LINKS``: ``duplicated_by``, ``related``, ``causes``). A caller names a link
from the ticket it writes on, in any of the five names (``LINK_NAMES``); ``causes`` and
``duplicated_by`` are stored from the other side. ``related`` is one link whichever side
it was made from.

Reading: a ticket's links to tickets in the caller's queues only (a link to a ticket it
cannot see is not shown to it). Writing (``link_plan``): a write of the ticket through
``TicketWrites.planned`` (its lock, key, checks, version, audit), refused when the other
ticket is not in a queue the caller may write, is the ticket itself, or (adding) the
link exists already / (removing) it does not. The link row says who made it and when;
the write's audit row holds the call (no history event: its field names are published).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, delete, insert, or_, select

from ticket_server.tickets.domain import (
    INVERSE_LINKS,
    LinkType,
    NoChange,
    TicketNotWritable,
    WriteRefused,
)
from ticket_server.tickets.models import Ticket, TicketLink
from ticket_server.tickets.schemas import LinkRecord

if TYPE_CHECKING:  # the write path (and search) load with the first write, not a read
    from ticket_server.tickets.writes import Plan, WriteContext

_LINKS, _TICKETS = TicketLink.__table__, Ticket.__table__
MAX_LINKS_SHOWN = 50
"""Most links a full read shows (the newest)."""


class SelfLink(WriteRefused):
    reason = "link to itself"


def stored(ticket_id: str, name: str, other_id: str) -> tuple[str, LinkType, str]:
    """``(from, type, to)`` as the link ``ticket_id name other_id`` is stored."""
    if name in {kind.value for kind in LinkType}:
        return ticket_id, LinkType(name), other_id
    return other_id, LinkType(INVERSE_LINKS[name]), ticket_id


def _matching(ticket_id: str, name: str, other_id: str) -> Any:
    """The rows that are this link (``related``: made from either side)."""
    source, kind, target = stored(ticket_id, name, other_id)
    this = and_(_LINKS.c.ticket_id == source, _LINKS.c.other_id == target, _LINKS.c.type == kind)
    if kind is not LinkType.RELATED:
        return this
    return or_(
        this,
        and_(_LINKS.c.ticket_id == target, _LINKS.c.other_id == source, _LINKS.c.type == kind),
    )


def links_of(conn: Connection, ticket_id: str, queues: frozenset[str] | None) -> list[LinkRecord]:
    """The links of ``ticket_id`` as read from it, to tickets within ``queues`` (None:
    every queue), newest first, at most ``MAX_LINKS_SHOWN``."""
    out: list[LinkRecord] = []
    for mine, theirs, inverse in (
        (_LINKS.c.ticket_id, _LINKS.c.other_id, False),
        (_LINKS.c.other_id, _LINKS.c.ticket_id, True),
    ):
        stmt = (
            select(theirs.label("other"), _LINKS.c.type, _LINKS.c.actor, _LINKS.c.created_at)
            .join(_TICKETS, _TICKETS.c.id == theirs)
            .where(mine == ticket_id)
            .order_by(_LINKS.c.created_at.desc(), _LINKS.c.pk.desc())
            .limit(MAX_LINKS_SHOWN)
        )
        if queues is not None:
            stmt = stmt.where(_TICKETS.c.queue.in_(sorted(queues)))
        for row in conn.execute(stmt):
            kind = str(LinkType(row.type).value)
            out.append(
                LinkRecord(
                    type=INVERSE_LINKS[kind] if inverse else kind,
                    ticket_id=row.other,
                    actor=row.actor,
                    created_at=row.created_at,
                )
            )
    out.sort(key=lambda link: link.created_at, reverse=True)
    return out[:MAX_LINKS_SHOWN]


def writable_ticket(conn: Connection, ctx: WriteContext, ticket_id: str) -> Any:
    """The row (id, queue, status) of ``ticket_id`` if the caller may write in its queue,
    else ``TicketNotWritable`` (the answer for a missing ticket too)."""
    row = conn.execute(
        select(_TICKETS.c.id, _TICKETS.c.queue, _TICKETS.c.status).where(_TICKETS.c.id == ticket_id)
    ).first()
    if row is None or (ctx.queues is not None and row.queue not in ctx.queues):
        raise TicketNotWritable(
            f"No ticket {ticket_id} in a queue this caller may write; nothing was changed."
        )
    return row


def add_link(
    conn: Connection, actor: str, ticket_id: str, name: str, other_id: str, now: datetime
) -> None:
    """Store the link ``ticket_id name other_id`` (no check)."""
    source, kind, target = stored(ticket_id, name, other_id)
    conn.execute(
        insert(_LINKS).values(
            ticket_id=source, other_id=target, type=kind, actor=actor, created_at=now
        )
    )


def has_link(conn: Connection, ticket_id: str, name: str, other_id: str) -> bool:
    return (
        conn.execute(select(_LINKS.c.pk).where(_matching(ticket_id, name, other_id))).first()
        is not None
    )


def link_plan(
    ctx: WriteContext, ticket_id: str, name: str, other_id: str, remove: bool
) -> Callable[[dict[str, Any]], Plan]:
    """The plan of adding (or removing) the link ``ticket_id name other_id``."""
    from ticket_server.tickets.writes import Plan

    def check(conn: Connection) -> None:
        if other_id == ticket_id:
            raise SelfLink("A ticket cannot be linked to itself; nothing was changed.")
        writable_ticket(conn, ctx, other_id)
        exists = has_link(conn, ticket_id, name, other_id)
        if exists and not remove:
            raise NoChange(f"{ticket_id} is already {name} {other_id}; nothing was changed.")
        if remove and not exists:
            raise NoChange(f"{ticket_id} is not {name} {other_id}; nothing was changed.")

    def apply(conn: Connection, now: datetime) -> None:
        if remove:
            conn.execute(delete(_LINKS).where(_matching(ticket_id, name, other_id)))
        else:
            add_link(conn, ctx.actor, ticket_id, name, other_id, now)

    return lambda state: Plan({}, check=check, apply=apply)
