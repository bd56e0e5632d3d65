"""The write tools of related tickets: link_tickets and merge_tickets (scope
``tickets:write``, on the caller's queues), governed exactly as the other writes
(``tools.writes.Writer``: checks before confirmation, confirmation where policy says,
idempotency key, one transaction with the audit row). ``merge_tickets`` is confirmed by
default (``Settings.confirm_writes``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastmcp import Context
from fastmcp.dependencies import Depends
from fastmcp.tools import ToolResult
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from ticket_server.tickets.domain import LINK_NAMES
from ticket_server.tools.declare import write_tool
from ticket_server.tools.lookup import normalise_ticket_id
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.writes import (
    UPDATE,
    Key,
    TicketId,
    TicketState,
    Version,
    Writer,
    ticket_state,
)

if TYPE_CHECKING:
    from ticket_server.tickets.writes import Checked, WriteContext, WriteOutcome

MERGE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False
)
LinkName = Literal["duplicate_of", "duplicated_by", "related", "caused_by", "causes"]
assert LinkName.__args__ == LINK_NAMES  # type: ignore[attr-defined]


class Linked(BaseModel):
    ticket: TicketState
    link: LinkName
    other_ticket_id: str
    removed: bool


class Merged(BaseModel):
    source: TicketState
    target_ticket_id: str
    comments_moved: int


def _planned(
    writer: Writer,
    make: Callable[[WriteContext], Any],
    closed_ok: bool = False,
    also_locks: str | None = None,
) -> Any:
    """An operation for ``Writer.perform``: ``TicketWrites.planned`` with the plan
    ``make(wctx)`` builds (``also_locks``: the other ticket it changes)."""

    async def operation(wctx: WriteContext, ticket_id: str, *, audit: Any) -> Any:
        return await writer.writes.planned(
            wctx, ticket_id, make(wctx), audit, closed_ok=closed_ok, also_locks=also_locks
        )

    return operation


async def link_tickets(
    ticket_id: TicketId,
    link: Annotated[LinkName, Field(description="How ticket_id relates to the other.")],
    other_ticket_id: TicketId,
    ctx: Context,
    remove: Annotated[bool, Field(description="true: remove this link.")] = False,
    idempotency_key: Key = None,
    expected_version: Version = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Link two tickets of queues you may write (remove=true unlinks); get_ticket
    shows links from both sides. Returns the ticket's new state."""
    from ticket_server.tickets.links import link_plan

    writer = services.write
    tid, other = normalise_ticket_id(ticket_id), normalise_ticket_id(other_ticket_id)
    return await writer.perform(
        ctx,
        "link_tickets",
        tid,
        {"link": link, "other_ticket_id": other, "remove": remove},
        idempotency_key,
        expected_version,
        lambda checked: _question(
            f"{'Remove the link' if remove else 'Link'} {tid} {link} {other}?", checked
        ),
        # The other ticket's row is locked too (a link row's key takes a lock on it): two
        # writes linking the same two tickets from either side take turns, not deadlock.
        _planned(
            writer,
            lambda wctx: link_plan(wctx, tid, link, other, remove),
            also_locks=other if other != tid else None,
        ),
        shape=lambda outcome: Linked(
            ticket=ticket_state(outcome), link=link, other_ticket_id=other, removed=remove
        ),
    )


async def merge_tickets(
    source_ticket_id: Annotated[TicketId, Field(description="The duplicate, closed by this.")],
    target_ticket_id: Annotated[TicketId, Field(description="The ticket that stays.")],
    ctx: Context,
    idempotency_key: Key = None,
    expected_version: Version = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Merge a duplicate into the ticket that stays (queues you may write): its first
    message and comments move there, marked merged_from; it is closed, duplicate_of the
    target. Nobody is notified. Final; may ask the person to confirm."""
    from ticket_server.tickets.merge import merge_plan

    writer, repo = services.write, services.repository
    source, target = (
        normalise_ticket_id(source_ticket_id),
        normalise_ticket_id(target_ticket_id),
    )

    async def merged(outcome: WriteOutcome) -> Merged:
        moved = await writer.guarded(repo.read(lambda conn: _moved(conn, source, target)))
        return Merged(source=ticket_state(outcome), target_ticket_id=target, comments_moved=moved)

    return await writer.perform(
        ctx,
        "merge_tickets",
        source,
        {"target_ticket_id": target},
        idempotency_key,
        expected_version,
        lambda checked: _question(
            f"Merge {source} into {target}? {source} is closed and its conversation moves "
            f"to {target}; this cannot be undone.",
            checked,
        ),
        # A closed source: the plan says whether it was merged already.
        _planned(
            writer,
            lambda wctx: merge_plan(wctx, source, target),
            closed_ok=True,
            also_locks=target if target != source else None,
        ),
        shape=merged,
    )


def _moved(conn: Any, source: str, target: str) -> int:
    """The comments of ``target`` marked as merged from ``source`` (its first message
    left out of the count)."""
    from sqlalchemy import func, select

    from ticket_server.tickets.models import Comment

    table = Comment.__table__
    count = conn.execute(
        select(func.count()).where(table.c.ticket_id == target, table.c.merged_from == source)
    ).scalar_one()
    return max(int(count) - 1, 0)


def _question(title: str, checked: Checked) -> str:
    lines = [title]
    if checked.changes:
        lines.append(
            "Changes: "
            + "; ".join(
                f"{c.field.value} {c.old_value or 'none'} -> {c.new_value or 'none'}"
                for c in checked.changes
            )
        )
    return "\n".join(lines)


TOOLS = [write_tool(link_tickets, UPDATE, Linked), write_tool(merge_tickets, MERGE, Merged)]
"""The link and merge tools, added by ``build_server`` (not on a read-only server)."""
