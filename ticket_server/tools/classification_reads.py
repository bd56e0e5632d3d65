"""What the reads take from a ticket's classification (``tickets.classification``):
``tags`` and ``custom_fields`` by name in ``get_ticket``, and the tag and field filters
of ``search_tickets_v2`` (resolved against the vocabulary and the definitions here, so
that ``tickets.search`` only turns them into conditions)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

from ticket_server.tools.errors import model_error

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ticket_server.tickets.repository import TicketRepository

MAX_FILTERS = 10


def classification_json(conn: Connection, ticket_id: str, wanted: set[str]) -> dict[str, Any]:
    """``tags`` and/or ``custom_fields`` (those in ``wanted``) of the ticket ``ticket_id``,
    read on ``conn``."""
    from sqlalchemy import select

    from ticket_server.tickets.classification import read_classification
    from ticket_server.tickets.models import Ticket

    pk = conn.execute(select(Ticket.pk).where(Ticket.id == ticket_id)).scalar()
    if pk is None:
        return {}
    found = read_classification(conn, [pk])[pk].as_json()
    return {k: v for k, v in found.items() if k in wanted}


def fit_page(
    value: dict[str, Any], comments: Sequence[Any], cursor_for: Callable[[Any], str], limit: int
) -> None:
    """Keep ``value`` (a ticket's JSON, tags and fields added after its page was cut)
    within ``limit`` bytes: the oldest comments of its conversation page go (the page
    then says ``truncated`` and its ``next_cursor`` leads to them); ``comments``: the
    records the page shows, newest first; ``cursor_for(c)``: the cursor to those older
    than ``c``."""
    conversation = value.get("conversation")
    page = conversation.get("comments") if isinstance(conversation, dict) else None

    def size() -> int:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())

    while page and size() > limit:
        page.pop()
        assert isinstance(conversation, dict)
        conversation.update(
            returned=len(page),
            truncated=True,
            next_cursor=cursor_for(comments[len(page) - 1]) if page else None,
        )


async def search_filters(
    repo: TicketRepository, tags: list[str] | None, fields: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``SearchFilters`` arguments of a search's ``tags`` (every one, by name) and
    ``fields`` (name -> value, equal), checked: an unknown tag or field, or a value the
    field cannot hold, is a ``ToolError`` saying what exists. Empty when neither is given."""
    from sqlalchemy import select

    from ticket_server.tickets.classification import (
        coerce,
        field_definitions,
        fold_field_name,
        fold_tag,
    )
    from ticket_server.tickets.classification_models import VALUE_COLUMN, FieldType, Tag
    from ticket_server.tickets.domain import WriteRefused

    if not tags and not fields:
        return {}

    def read(conn: Connection) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if tags:
            names = sorted({fold_tag(t) for t in tags})
            ids = {
                r.name: r.id
                for r in conn.execute(select(Tag.name, Tag.id).where(Tag.name.in_(names)))
            }
            unknown = [n for n in names if n not in ids]
            if unknown:
                known = conn.execute(
                    select(Tag.name).where(Tag.active.is_(True)).order_by(Tag.name).limit(30)
                ).scalars()
                raise model_error(
                    f"There is no tag {unknown[0]!r}; the tags are: {', '.join(known) or 'none'}. "
                    "Use one of these, or leave tags out."
                )
            out["tags"] = tuple(ids[n] for n in names)
        if fields:
            definitions = {d.name: d for d in field_definitions(conn, active_only=False)}
            wanted = []
            for name, value in sorted(fields.items()):
                definition = definitions.get(fold_field_name(name))
                if definition is None:
                    raise model_error(
                        f"There is no field {name[:64]!r}; the fields are: "
                        f"{', '.join(d.describe() for d in definitions.values()) or 'none'}. "
                        "Use their names, or leave fields out."
                    )
                if value is None:
                    raise model_error(f"fields.{definition.name}: give a value to match, not null.")
                typed: Any = coerce(definition, value)
                if definition.type is FieldType.DATE:
                    typed = date.fromisoformat(typed)
                wanted.append((definition.id, VALUE_COLUMN[definition.type], typed))
            out["fields"] = tuple(wanted)
        return out

    try:
        return await repo.read(read)
    except WriteRefused as exc:  # a tag or field name, or a value, it cannot hold
        raise model_error(str(exc).replace(" Nothing was changed.", "")) from exc
