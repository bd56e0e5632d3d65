"""Merging one ticket (the source) into another (the target), one write of the source
through ``TicketWrites.planned`` (its lock, idempotency key, checks, version, audit row),
in one transaction:

1. refused when the target is the source, is not in a queue the caller may write, is
   closed, or when the source was merged already (closed, ``duplicate_of`` a ticket);
   a closed source that was not merged is refused as a closed ticket is;
2. the source's comments move to the target (re-pointed, so each appears there exactly
   once), marked ``merged_from`` the source; the source's first message (its body)
   appears in the target as the customer's comment of the source's time, marked too;
   the source's attachments move with them (they may take the target past its total);
3. the source is closed (a ``status`` history event), linked ``duplicate_of`` the target
   and given an internal note naming it; the target gets an internal note naming the
   source and a new version (its row locked; its search postings, keyed by creation, stay).

Nobody is notified: a merge writes no public reply, so the requester hears of it only
when an agent replies on the target. SLA state: the source's stops with its closing; the
target keeps its own (no policy runs here).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from ticket_server.tickets import sla_store
from ticket_server.tickets.attachment_models import Attachment
from ticket_server.tickets.domain import (
    AlreadyMerged,
    AuthorType,
    EventField,
    LinkType,
    TicketClosed,
    TicketStatus,
    Visibility,
    WriteRefused,
)
from ticket_server.tickets.links import add_link, has_link, writable_ticket
from ticket_server.tickets.models import Comment, Ticket, TicketLink
from ticket_server.tickets.search import comment_search_bodies
from ticket_server.tickets.writes import Plan, WriteContext

_TICKETS, _COMMENTS, _LINKS = Ticket.__table__, Comment.__table__, TicketLink.__table__
_ATTACHMENTS = Attachment.__table__


class MergeRefused(WriteRefused):
    reason = "merge refused"


def merged_into(conn: Connection, ticket_id: str) -> str | None:
    """The ticket ``ticket_id`` was merged into (closed and ``duplicate_of`` it), or None."""
    row = conn.execute(
        select(_LINKS.c.other_id)
        .join(_TICKETS, _TICKETS.c.id == _LINKS.c.ticket_id)
        .where(
            _LINKS.c.ticket_id == ticket_id,
            _LINKS.c.type == LinkType.DUPLICATE_OF,
            _TICKETS.c.status == TicketStatus.CLOSED,
        )
        .limit(1)
    ).first()
    return None if row is None else str(row.other_id)


def merge_plan(
    ctx: WriteContext, source_id: str, target_id: str
) -> Callable[[dict[str, Any]], Plan]:
    """The plan of merging ``source_id`` into ``target_id`` (the module docstring)."""

    def plan(state: dict[str, Any]) -> Plan:
        closed = state["status"] == TicketStatus.CLOSED

        def check(conn: Connection) -> None:
            if closed:
                already = merged_into(conn, source_id)
                if already is not None:
                    raise AlreadyMerged(
                        f"{source_id} was already merged into {already}; nothing was changed."
                    )
                raise TicketClosed(source_id)
            if target_id == source_id:
                raise MergeRefused("A ticket cannot be merged into itself; nothing was changed.")
            target = writable_ticket(conn, ctx, target_id)
            if target.status == TicketStatus.CLOSED:
                raise MergeRefused(
                    f"{target_id} is closed, so nothing can be merged into it; nothing was "
                    "changed. Merge into an open ticket."
                )

        def apply(conn: Connection, now: datetime) -> None:
            _merge(conn, ctx, source_id, target_id, now)

        fields = {} if closed else {EventField.STATUS: TicketStatus.CLOSED}
        return Plan(fields, check=check, apply=apply)

    return plan


def _merge(
    conn: Connection, ctx: WriteContext, source_id: str, target_id: str, now: datetime
) -> None:
    found = select(
        _TICKETS.c.pk,
        _TICKETS.c.version,
        _TICKETS.c.updated_at,
        _TICKETS.c.search_subject,
        _TICKETS.c.search_body,
    ).where(_TICKETS.c.id == target_id)
    if conn.dialect.name == "postgresql":
        found = found.with_for_update()
    target = conn.execute(found).mappings().one()
    source = conn.execute(
        select(_TICKETS.c.body, _TICKETS.c.customer, _TICKETS.c.created_at).where(
            _TICKETS.c.id == source_id
        )
    ).one()
    moved = conn.execute(
        update(_COMMENTS)
        .where(_COMMENTS.c.ticket_id == source_id)
        .values(ticket_id=target_id, merged_from=func.coalesce(_COMMENTS.c.merged_from, source_id))
    ).rowcount
    # Their files (and the first message's) go with them: listed and read on the target.
    conn.execute(
        update(_ATTACHMENTS)
        .where(_ATTACHMENTS.c.ticket_id == source_id)
        .values(ticket_id=target_id)
    )
    notes = [
        f"Merged into {target_id}: this ticket's conversation ({moved} comments) is there now.",
        f"Merged {source_id} into this ticket: its first message and {moved} comments.",
    ]
    first, source_note, target_note = comment_search_bodies(conn, [source.body, *notes])
    conn.execute(
        insert(_COMMENTS),
        [
            {
                "ticket_id": target_id,
                "author": source.customer,
                "author_type": AuthorType.CUSTOMER,
                "visibility": Visibility.PUBLIC,
                "body": source.body,
                "created_at": source.created_at,
                "search_body": first,
                "merged_from": source_id,
            },
            _note(source_id, notes[0], source_note, now),
            _note(target_id, notes[1], target_note, now),
        ],
    )
    if not has_link(conn, source_id, LinkType.DUPLICATE_OF.value, target_id):
        add_link(conn, ctx.actor, source_id, LinkType.DUPLICATE_OF.value, target_id, now)
    conn.execute(
        update(_TICKETS)
        .where(_TICKETS.c.id == target_id)
        .values(version=target["version"] + 1, updated_at=now)
    )
    sla_store.refresh(conn, [target_id])  # the source's replies may answer the target


def _note(ticket_id: str, body: str, search_body: str, now: datetime) -> dict[str, Any]:
    return {
        "ticket_id": ticket_id,
        "author": "system",
        "author_type": AuthorType.SYSTEM,
        "visibility": Visibility.INTERNAL,
        "body": body,
        "created_at": now,
        "search_body": search_body,
        "merged_from": None,
    }
