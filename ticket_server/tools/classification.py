"""The tag and custom field tools, `update_ticket_tags` and `set_ticket_fields` (toolset
triage, scope ``tickets:write`` on the caller's queues), and what reads and search take
from the classification (``tickets.classification``).

The writes are governed as every write of ``tools.writes`` is, through its ``Writer``:
the caller's writable queues, ``expected_version``, an idempotency key, a person's
confirmation when the policy names the tool, and the audit row (``change.before`` /
``after`` hold the tags and fields changed) in the write's own transaction. A refusal
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastmcp import Context
from fastmcp.dependencies import Depends
from fastmcp.tools import ToolResult
from pydantic import BaseModel, Field

from ticket_server.tools.declare import write_tool
from ticket_server.tools.errors import model_error
from ticket_server.tools.lookup import normalise_ticket_id
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.writes import (
    UPDATE,
    Key,
    TicketId,
    TicketState,
    Version,
    ticket_state,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ticket_server.tickets.classification import ClassificationChange
    from ticket_server.tickets.writes import WriteOutcome

MAX_CHANGES = 20
TagName = Annotated[str, Field(min_length=1, max_length=64)]
FieldName = Annotated[str, Field(min_length=1, max_length=64)]
FieldValue = Annotated[str, Field(max_length=1000)] | float | bool | None
Tags = Annotated[
    list[TagName], Field(max_length=MAX_CHANGES, description="Tag names; case is ignored.")
]


class Classified(BaseModel):
    ticket: TicketState
    tags: list[str]
    custom_fields: dict[str, str | float | bool]
    before: dict[str, Any]
    after: dict[str, Any]


def _classified(outcome: WriteOutcome) -> Classified:
    done = outcome.classification or {}
    return Classified(
        ticket=ticket_state(outcome),
        tags=done.get("tags", []),
        custom_fields=done.get("custom_fields", {}),
        before=done.get("before", {}),
        after=done.get("after", {}),
    )


def _change(
    change: ClassificationChange, free_tags: bool
) -> Callable[[Connection, dict[str, Any], Any], dict[str, Any]]:
    """The ``Classify`` of ``change`` for ``TicketWrites.classify``."""

    def classify(conn: Connection, state: dict[str, Any], now: Any) -> dict[str, Any]:
        from ticket_server.tickets.classification import apply_classification

        diff = apply_classification(
            conn, state["pk"], state["queue"], change, free_tags=free_tags, now=now
        )
        return {**diff.after.as_json(), **diff.audit()}

    return classify


def tag_change(
    add: list[str], remove: list[str], free_tags: bool
) -> Callable[[Connection, dict[str, Any], Any], dict[str, Any]]:
    """The ``Classify`` adding ``add`` and taking off ``remove`` (update_ticket_tags'
    change; bulk_update_tickets' tags part)."""
    from ticket_server.tickets.classification import ClassificationChange

    return _change(ClassificationChange(add_tags=tuple(add), remove_tags=tuple(remove)), free_tags)


def _question(title: str, classified: dict[str, Any] | None) -> str:
    diff = classified or {}
    lines = [title]
    for part in ("tags", "custom_fields"):
        if part in diff.get("after", {}):
            before = json.dumps(diff["before"][part], ensure_ascii=False)
            after = json.dumps(diff["after"][part], ensure_ascii=False)
            lines.append(f"{part}: {before} -> {after}")
    return "\n".join(lines)


async def update_ticket_tags(
    ticket_id: TicketId,
    ctx: Context,
    add: Annotated[Tags, Field(description="Tags to add; ones it has are kept.")] = [],  # noqa: B006
    remove: Annotated[Tags, Field(description="Tags to take off; others stay.")] = [],  # noqa: B006
    idempotency_key: Key = None,
    expected_version: Version = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Add and/or remove a ticket's tags; tags not named stay as they are. Only the
    deployment's vocabulary is accepted (unless it allows free tags); an unknown tag
    is an error listing the vocabulary. Refused on a closed ticket. Returns the
    ticket's state, tags and custom_fields, and before/after of what changed."""
    tid = normalise_ticket_id(ticket_id)
    if not add and not remove:
        raise model_error("Give tags to add, to remove, or both; nothing was changed.")
    writer = services.write
    return await writer.perform(
        ctx,
        "update_ticket_tags",
        tid,
        {"add": sorted(add), "remove": sorted(remove)},
        idempotency_key,
        expected_version,
        lambda checked: _question(f"Change the tags of {tid}?", checked.classification),
        writer.writes.classify,
        tag_change(add, remove, services.free_tags),
        shape=_classified,
    )


async def set_ticket_fields(
    ticket_id: TicketId,
    fields: Annotated[
        dict[FieldName, FieldValue],
        Field(
            min_length=1,
            max_length=MAX_CHANGES,
            description="Field name -> value; null clears. Other fields stay.",
        ),
    ],
    ctx: Context,
    idempotency_key: Key = None,
    expected_version: Version = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Set custom fields of a ticket by name. Each value must fit the field's type:
    text, number, date (YYYY-MM-DD), enum (one of its values) or boolean; null clears
    (not a required field). Unknown field, wrong type or value: an error naming what
    it takes. Refused on a closed ticket. Returns as update_ticket_tags does."""
    from ticket_server.tickets.classification import ClassificationChange

    tid = normalise_ticket_id(ticket_id)
    change = ClassificationChange(fields=dict(fields))
    writer = services.write
    return await writer.perform(
        ctx,
        "set_ticket_fields",
        tid,
        {"fields": dict(sorted(fields.items()))},
        idempotency_key,
        expected_version,
        lambda checked: _question(f"Change custom fields of {tid}?", checked.classification),
        writer.writes.classify,
        _change(change, services.free_tags),
        shape=_classified,
    )


TOOLS = [write_tool(fn, UPDATE, Classified) for fn in (update_ticket_tags, set_ticket_fields)]
"""The tag and custom field tools, added by ``build_server`` (not on a read-only server)."""
