"""`ticket-server tags add|list|deactivate` and `ticket-server fields
add|list|deactivate|load`: the deployment's tag vocabulary and custom field definitions,
which only an operator defines (never a caller). Nothing is ever deleted: a deactivated
tag or field stays on the tickets that have it and in their history, and cannot be set
any more. Each mistake is one line (``CommandError``, exit status 2) and changes nothing.

Also the sample's classification (``seed_classification``): a few tags and fields, and
their values on tickets chosen deterministically from each ticket's id.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tomllib
import zlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ticket_server.admin import CommandError
from ticket_server.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy import Connection

T = TypeVar("T")
FIELD_TYPES = ("text", "number", "date", "enum", "boolean")
FILE_KEYS = {"name", "label", "type", "values", "required", "queues"}


def _run(settings: Settings, work: Callable[[Connection], T], *, writes: bool) -> T:
    """``work`` in one transaction on the migrated database (refused first, in one line,
    when it ``writes`` and the SQLite file is read-only)."""
    from sqlalchemy.exc import SQLAlchemyError

    from ticket_server.db import (
        DatabaseSetupError,
        create_engine,
        require_current_schema,
        sqlite_write_problem,
    )

    problem = sqlite_write_problem(settings.database_url) if writes else None
    if problem is not None:
        raise CommandError(problem)

    async def main() -> T:
        await require_current_schema(settings)
        engine = create_engine(settings, for_serving=False)
        try:
            async with engine.begin() as conn:
                return await conn.run_sync(work)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except DatabaseSetupError as exc:
        raise CommandError(str(exc)) from exc
    except SQLAlchemyError as exc:
        raise CommandError(f"the database refused the change ({type(exc).__name__})") from exc


def _tag_name(name: str) -> str:
    from ticket_server.tickets.classification import fold_tag
    from ticket_server.tickets.domain import WriteRefused

    try:
        return fold_tag(name)
    except WriteRefused as exc:
        raise CommandError(str(exc).removesuffix(" Nothing was changed.")) from None


def tags_add(settings: Settings, name: str, description: str = "") -> None:
    from sqlalchemy import insert, select

    from ticket_server.tickets.classification_models import Tag

    folded = _tag_name(name)
    if len(description) > 300:
        raise CommandError("tags add --description: at most 300 characters")

    def add(conn: Connection) -> None:
        found = conn.execute(select(Tag.active).where(Tag.name == folded)).first()
        if found is not None:
            state = "active" if found.active else "deactivated"
            raise CommandError(f"tags add: tag {folded!r} exists already ({state})")
        conn.execute(
            insert(Tag.__table__).values(
                name=folded, description=description, active=True, created_at=datetime.now(UTC)
            )
        )

    _run(settings, add, writes=True)
    print(f"tag {folded!r} added", file=sys.stderr)


def tags_list(settings: Settings, as_json: bool = False) -> None:
    from sqlalchemy import func, select

    from ticket_server.admin.commands import _print_table
    from ticket_server.tickets.classification_models import Tag, TicketTag

    def rows(conn: Connection) -> list[dict[str, Any]]:
        used = (
            select(TicketTag.tag_id, func.count().label("n")).group_by(TicketTag.tag_id).subquery()
        )
        stmt = (
            select(Tag.name, Tag.description, Tag.active, func.coalesce(used.c.n, 0).label("n"))
            .outerjoin(used, used.c.tag_id == Tag.id)
            .order_by(Tag.name)
        )
        return [
            {"name": r.name, "description": r.description, "active": r.active, "tickets": r.n}
            for r in conn.execute(stmt)
        ]

    found = _run(settings, rows, writes=False)
    if as_json:
        for row in found:
            print(json.dumps(row, ensure_ascii=False))
        return
    if not found:
        print("no tags defined (ticket-server tags add NAME)", file=sys.stderr)
        return
    table = [["NAME", "ACTIVE", "TICKETS", "DESCRIPTION"]]
    table += [
        [r["name"], "yes" if r["active"] else "no", str(r["tickets"]), r["description"]]
        for r in found
    ]
    _print_table(table)


def _deactivate(settings: Settings, kind: str, name: str) -> None:
    from sqlalchemy import select, update

    from ticket_server.tickets.classification_models import CustomField, Tag

    model: Any = Tag if kind == "tag" else CustomField
    folded = _tag_name(name) if kind == "tag" else name.strip().lower()

    def deactivate(conn: Connection) -> None:
        found = conn.execute(select(model.active).where(model.name == folded)).first()
        if found is None:
            raise CommandError(
                f"{kind}s deactivate: no {kind} {folded!r} (ticket-server {kind}s list)"
            )
        if not found.active:
            raise CommandError(f"{kind}s deactivate: {kind} {folded!r} is deactivated already")
        conn.execute(update(model).where(model.name == folded).values(active=False))

    _run(settings, deactivate, writes=True)
    print(
        f"{kind} {folded!r} deactivated: tickets keep it; it can no longer be set",
        file=sys.stderr,
    )


def tags_deactivate(settings: Settings, name: str) -> None:
    _deactivate(settings, "tag", name)


def fields_deactivate(settings: Settings, name: str) -> None:
    _deactivate(settings, "field", name)


def field_row(spec: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A ``custom_fields`` row from a definition (``name``, ``label``, ``type``,
    ``values`` for an enum, ``required``, ``queues``); ``CommandError`` naming ``where``
    and what is wrong."""
    from ticket_server.tickets.classification import FIELD_NAME

    unknown = sorted(set(spec) - FILE_KEYS)
    if unknown:
        raise CommandError(
            f"{where}: unknown key {unknown[0]!r}; a field has {', '.join(sorted(FILE_KEYS))}"
        )
    name = spec.get("name")
    if not isinstance(name, str) or not FIELD_NAME.match(name.strip().lower()):
        raise CommandError(
            f"{where}: name must be 1 to 64 of a-z, 0-9 and '_', starting with a letter"
        )
    name = name.strip().lower()
    kind = spec.get("type")
    if kind not in FIELD_TYPES:
        raise CommandError(f"{where}: field {name}: type must be one of {', '.join(FIELD_TYPES)}")
    label = spec.get("label", name)
    if not isinstance(label, str) or not label.strip() or len(label) > 200:
        raise CommandError(f"{where}: field {name}: label must be 1 to 200 characters")
    values = spec.get("values")
    if kind == "enum":
        if (
            not isinstance(values, list)
            or not values
            or len(values) > 100
            or not all(isinstance(v, str) and 0 < len(v.strip()) <= 100 for v in values)
            or len({v.strip().lower() for v in values}) != len(values)
        ):
            raise CommandError(
                f"{where}: field {name}: an enum needs values, 1 to 100 distinct strings of 1 "
                "to 100 characters (case ignored)"
            )
        values = [v.strip() for v in values]
    elif values is not None:
        raise CommandError(f"{where}: field {name}: values apply to an enum field only")
    required = spec.get("required", False)
    if not isinstance(required, bool):
        raise CommandError(f"{where}: field {name}: required must be true or false")
    queues = spec.get("queues")
    if queues is not None and (
        not isinstance(queues, list)
        or not queues
        or not all(isinstance(q, str) and 0 < len(q.strip()) <= 64 for q in queues)
    ):
        raise CommandError(f"{where}: field {name}: queues must be a list of queue names")
    return {
        "name": name,
        "label": label.strip(),
        "type": kind,
        "enum_values": json.dumps(values, ensure_ascii=False) if values else None,
        "required": required,
        "queues": json.dumps(sorted({q.strip().lower() for q in queues})) if queues else None,
    }


def _add_fields(conn: Connection, rows: list[dict[str, Any]], where: str) -> list[str]:
    from sqlalchemy import insert, select

    from ticket_server.tickets.classification_models import CustomField

    names = [r["name"] for r in rows]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CommandError(f"{where}: field {twice[0]} is defined twice")
    taken = conn.execute(
        select(CustomField.name).where(CustomField.name.in_(names)).order_by(CustomField.name)
    ).scalars()
    first = next(iter(taken), None)
    if first is not None:
        raise CommandError(
            f"{where}: field {first} exists already (definitions are never replaced; "
            "deactivate it and add one of another name)"
        )
    from ticket_server.tickets.models import Ticket

    known = set(conn.execute(select(Ticket.queue).distinct()).scalars())
    for row in rows:
        for queue in json.loads(row["queues"] or "[]"):
            if known and queue not in known:
                raise CommandError(
                    f"{where}: field {row['name']}: there is no queue {queue!r}; the queues "
                    f"are {', '.join(sorted(known))}"
                )
    now = datetime.now(UTC)
    conn.execute(
        insert(CustomField.__table__), [{**r, "active": True, "created_at": now} for r in rows]
    )
    return names


def fields_add(
    settings: Settings,
    name: str,
    kind: str,
    label: str | None,
    values: list[str] | None,
    required: bool,
    queues: list[str] | None,
) -> None:
    spec: dict[str, Any] = {"name": name, "type": kind, "required": required}
    for key, value in (("label", label), ("values", values), ("queues", queues)):
        if value is not None:
            spec[key] = value
    row = field_row(spec, "fields add")
    _run(settings, lambda conn: _add_fields(conn, [row], "fields add"), writes=True)
    print(f"field {row['name']!r} added", file=sys.stderr)


def read_field_file(path: Path) -> list[dict[str, Any]]:
    """The definitions of a TOML (``[[field]]`` tables) or JSON (a list, or
    ``{"field": [...]}``) file, each checked (``field_row``)."""
    where = f"fields load {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{where}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CommandError(f"{where}: not UTF-8 text") from None
    try:
        data: Any = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise CommandError(f"{where}: not valid {kind} ({str(exc).splitlines()[0]})") from None
    specs = data.get("field") if isinstance(data, dict) else data
    if not isinstance(specs, list) or not specs:
        raise CommandError(f"{where}: give the fields as [[field]] tables (TOML) or a JSON list")
    out = []
    for number, spec in enumerate(specs, start=1):
        if not isinstance(spec, dict):
            raise CommandError(f"{where}: field {number} is not a table")
        out.append(field_row(spec, f"{where}: field {number}"))
    return out


def fields_load(settings: Settings, path: str) -> None:
    rows = read_field_file(Path(path))
    names = _run(settings, lambda conn: _add_fields(conn, rows, f"fields load {path}"), writes=True)
    print(f"{len(names)} field(s) added: {', '.join(names)}", file=sys.stderr)


def fields_list(settings: Settings, as_json: bool = False) -> None:
    from ticket_server.admin.commands import _print_table
    from ticket_server.tickets.classification import field_definitions

    found = _run(settings, lambda conn: field_definitions(conn, active_only=False), writes=False)
    rows: list[dict[str, Any]] = [
        {
            "name": d.name,
            "label": d.label,
            "type": d.type.value,
            "values": list(d.enum_values) or None,
            "required": d.required,
            "queues": list(d.queues) if d.queues is not None else None,
            "active": d.active,
        }
        for d in found
    ]
    if as_json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return
    if not rows:
        print("no fields defined (ticket-server fields add | load)", file=sys.stderr)
        return
    table = [["NAME", "TYPE", "REQUIRED", "QUEUES", "ACTIVE", "LABEL", "VALUES"]]
    table += [
        [
            r["name"],
            r["type"],
            "yes" if r["required"] else "no",
            ",".join(r["queues"] or ["all"]),
            "yes" if r["active"] else "no",
            r["label"],
            ",".join(r["values"] or []),
        ]
        for r in rows
    ]
    _print_table(table)


# --- the sample's classification -------------------------------------------------------

SAMPLE_TAGS = {
    "vip": "A customer on a priority contract.",
    "bug": "A defect in the product.",
    "feature-request": "Asks for something the product does not do.",
    "outage": "Part of the service was down.",
    "data-export": "About exporting data.",
    "sso": "Single sign-on and identity providers.",
    "refund": "The customer asks for money back.",
    "onboarding-call": "A call with the customer's new team.",
}
SAMPLE_FIELDS: list[dict[str, Any]] = [
    {
        "name": "severity",
        "label": "Severity",
        "type": "enum",
        "values": ["sev1", "sev2", "sev3", "sev4"],
        "queues": ["engineering", "security", "support"],
    },
    {"name": "affected_users", "label": "Affected users", "type": "number"},
    {"name": "due_date", "label": "Due date", "type": "date"},
    {"name": "renewal_risk", "label": "Renewal at risk", "type": "boolean", "queues": ["billing"]},
    {"name": "external_ref", "label": "External reference", "type": "text"},
]
SEED_BATCH = 5000


def _sample_values(ticket_id: str, queue: str, created: Any) -> tuple[list[str], dict[str, Any]]:
    """The sample's tags and field values of one ticket, from its id only (deterministic)."""
    h = zlib.crc32(ticket_id.encode())
    names = list(SAMPLE_TAGS)
    tags = []
    if h % 3 == 0:
        tags.append(names[(h >> 4) % len(names)])
    if h % 7 == 0:
        tags.append(names[(h >> 9) % len(names)])
    values: dict[str, Any] = {}
    if queue in ("engineering", "security", "support") and h % 2 == 0:
        values["severity"] = f"sev{1 + (h >> 12) % 4}"
    if h % 5 == 0:
        values["affected_users"] = float(1 + (h >> 14) % 500)
    if h % 11 == 0 and isinstance(created, datetime):
        values["due_date"] = (created + timedelta(days=7 + (h >> 3) % 21)).date()
    if queue == "billing" and h % 4 == 0:
        values["renewal_risk"] = bool((h >> 6) % 2)
    if h % 13 == 0:
        values["external_ref"] = f"JIRA-{1000 + (h >> 8) % 9000}"
    return sorted(set(tags)), values


def seed_classification(conn: Connection, tickets: bool) -> None:
    """The sample's vocabulary and field definitions (those missing), and, when
    ``tickets``, their values on every ticket without any (``_sample_values``)."""
    from sqlalchemy import insert, select

    from ticket_server.tickets.classification_models import (
        VALUE_COLUMN,
        CustomField,
        FieldType,
        Tag,
        TicketFieldValue,
        TicketTag,
    )
    from ticket_server.tickets.models import Ticket

    now = datetime.now(UTC)
    have = set(conn.execute(select(Tag.name)).scalars())
    new = [
        {"name": n, "description": d, "active": True, "created_at": now}
        for n, d in SAMPLE_TAGS.items()
        if n not in have
    ]
    if new:
        conn.execute(insert(Tag.__table__), new)
    have = set(conn.execute(select(CustomField.name)).scalars())
    fresh = [field_row(f, "sample") for f in SAMPLE_FIELDS if f["name"] not in have]
    if fresh:
        conn.execute(
            insert(CustomField.__table__),
            [{**r, "active": True, "created_at": now} for r in fresh],
        )
    if not tickets:
        return
    tag_ids = dict(conn.execute(select(Tag.name, Tag.id)).tuples().all())
    fields = {
        r.name: (r.id, FieldType(r.type))
        for r in conn.execute(select(CustomField.id, CustomField.name, CustomField.type))
    }
    tagged = select(TicketTag.ticket_pk).where(TicketTag.ticket_pk == Ticket.pk).exists()
    valued = select(TicketFieldValue.ticket_pk).where(TicketFieldValue.ticket_pk == Ticket.pk)
    last = 0
    while rows := conn.execute(
        select(Ticket.pk, Ticket.id, Ticket.queue, Ticket.created_at)
        .where(Ticket.pk > last, ~tagged, ~valued.exists())
        .order_by(Ticket.pk)
        .limit(SEED_BATCH)
    ).all():
        last = rows[-1].pk
        tag_rows: list[dict[str, Any]] = []
        value_rows: list[dict[str, Any]] = []
        for pk, ticket_id, queue, created in rows:
            tags, values = _sample_values(ticket_id, queue, created)
            tag_rows += [{"ticket_pk": pk, "tag_id": tag_ids[t]} for t in tags if t in tag_ids]
            for name, value in values.items():
                if name in fields:
                    field_id, kind = fields[name]
                    row: dict[str, Any] = dict.fromkeys(set(VALUE_COLUMN.values()))
                    row.update(ticket_pk=pk, field_id=field_id)
                    row[VALUE_COLUMN[kind]] = value
                    value_rows.append(row)
        if tag_rows:
            conn.execute(insert(TicketTag.__table__), tag_rows)
        if value_rows:
            conn.execute(insert(TicketFieldValue.__table__), value_rows)
