"""Resource templates of the classification (JSON, scope ``tickets:read``):
`tickets://tag/{name}` (the tag and the newest tickets in your queues carrying it) and
`tickets://field/{name}/{value}` (the field's definition and the newest tickets in your
queues whose field equals ``value``), and the completions of their arguments: tag
names, field names, and a field's enum values (``complete``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fastmcp.dependencies import Depends
from fastmcp.exceptions import ToolError
from fastmcp.resources import ResourceContent, ResourceResult, ResourceTemplate

from ticket_server.access.context import current_queues
from ticket_server.tools.classification_reads import search_filters
from ticket_server.tools.errors import UnavailableError, domain_errors
from ticket_server.tools.full_read import TICKET_URI
from ticket_server.tools.resources import JSON, missing
from ticket_server.tools.services import Services, current_services

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ticket_server.tickets.repository import TicketRepository

TAG_URI = "tickets://tag/{}"
FIELD_URI = "tickets://field/{}/{}"
TICKETS = 20
ARGUMENTS = {
    (TAG_URI.format("{name}"), "name"): "tag",
    (FIELD_URI.format("{name}", "{value}"), "name"): "field",
    (FIELD_URI.format("{name}", "{value}"), "value"): "field_value",
}
"""(URI template, argument) -> what ``complete`` offers for it."""


async def complete(
    repo: TicketRepository, kind: str, prefix: str, arguments: dict[str, str], limit: int
) -> list[str]:
    """Active tag names, active field names, or the enum values of the field named in
    ``arguments["name"]``, starting with ``prefix`` (any case)."""
    from sqlalchemy import select

    from ticket_server.tickets.classification import field_definitions
    from ticket_server.tickets.classification_models import Tag

    wanted = prefix.lower()

    def read(conn: Connection) -> list[str]:
        if kind == "tag":
            stmt = select(Tag.name).where(Tag.active.is_(True)).order_by(Tag.name)
            return [n for n in conn.execute(stmt).scalars() if n.startswith(wanted)][:limit]
        definitions = field_definitions(conn)
        if kind == "field":
            return [d.name for d in definitions if d.name.startswith(wanted)][:limit]
        name = arguments.get("name", "").strip().lower()
        values = next((d.enum_values for d in definitions if d.name == name), ())
        return [v for v in values if v.lower().startswith(wanted)][:limit]

    return await repo.read(read)


def _json(value: dict[str, Any]) -> ResourceResult:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return ResourceResult([ResourceContent(text, mime_type=JSON)])


async def _tickets(repo: TicketRepository, classified: dict[str, Any]) -> list[dict[str, Any]]:
    from ticket_server.tickets.search import SearchFilters

    filters = SearchFilters(queues=current_queues(), **classified)
    result = await repo.search("", filters, "newest", None, TICKETS, False)
    return [
        {
            "id": t.id,
            "status": t.status.value,
            "queue": t.queue,
            "updated_at": t.updated_at.isoformat(),
            "uri": TICKET_URI.format(t.id),
        }
        for t, _ in result.tickets
    ]


async def read_tag(name: str, services: Services = Depends(current_services)) -> ResourceResult:
    """``tickets://tag/{name}``: the tag and the newest tickets carrying it."""
    from sqlalchemy import select

    from ticket_server.tickets.classification_models import Tag

    repo = services.repository
    try:
        with domain_errors():
            classified = await search_filters(repo, [name], None)
            found = await repo.read(
                lambda conn: conn.execute(
                    select(Tag.name, Tag.description, Tag.active).where(
                        Tag.id == classified["tags"][0]
                    )
                ).one()
            )
            tickets = await _tickets(repo, classified)
    except UnavailableError:
        raise
    except ToolError:  # no such tag
        raise missing(TAG_URI.format(name)) from None
    return _json(
        {
            "name": found.name,
            "description": found.description,
            "active": found.active,
            "tickets": tickets,
        }
    )


async def read_field_value(
    name: str, value: str, services: Services = Depends(current_services)
) -> ResourceResult:
    """``tickets://field/{name}/{value}``: the field's definition and the newest tickets
    with this value."""
    from ticket_server.tickets.classification import field_definitions

    repo = services.repository
    definitions = await repo.read(lambda conn: field_definitions(conn, active_only=False))
    definition = next((d for d in definitions if d.name == name.strip().lower()), None)
    typed: Any = value
    if definition is not None and definition.type.value == "number":
        try:
            typed = float(value)
        except ValueError:
            definition = None
    elif definition is not None and definition.type.value == "boolean":
        typed = {"true": True, "false": False}.get(value.lower(), value)
    if definition is None:
        raise missing(FIELD_URI.format(name, value))
    try:
        with domain_errors():
            classified = await search_filters(repo, None, {definition.name: typed})
            tickets = await _tickets(repo, classified)
    except UnavailableError:
        raise
    except ToolError:  # a value the field cannot hold
        raise missing(FIELD_URI.format(name, value)) from None
    return _json(
        {
            "name": definition.name,
            "label": definition.label,
            "type": definition.type.value,
            "values": list(definition.enum_values) or None,
            "required": definition.required,
            "queues": list(definition.queues) if definition.queues is not None else None,
            "active": definition.active,
            "value": typed,
            "tickets": tickets,
        }
    )


TEMPLATES = [
    ResourceTemplate.from_function(
        read_tag,
        uri_template=TAG_URI.format("{name}"),
        name="tag",
        title="Tag",
        mime_type=JSON,
        tags={"tickets:read"},
        description="A tag of the vocabulary and the newest tickets in your queues carrying it.",
    ),
    ResourceTemplate.from_function(
        read_field_value,
        uri_template=FIELD_URI.format("{name}", "{value}"),
        name="field_value",
        title="Custom field value",
        mime_type=JSON,
        tags={"tickets:read"},
        description="A custom field's definition and the newest tickets in your queues with "
        "this value.",
    ),
]
"""The tag and field resource templates, added by ``build_server``."""
