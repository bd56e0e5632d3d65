"""A ticket's classification: tags from the deployment's vocabulary and custom fields
typed by its definitions (tables in ``classification_models``).

``apply_classification`` validates a change (``ClassificationChange``) against the
vocabulary and the definitions and, given the time, makes it, inside the caller's
transaction (a SQLAlchemy ``Connection``, as every write of ``tickets.writes`` runs):
the write tools call it through ``TicketWrites.classify``, and a tool that opens a
ticket calls it with ``opening=True`` after inserting the ticket, in the same
transaction, so that required fields are enforced and a refusal rolls the ticket back.

Rules (each refusal a ``WriteRefused`` saying what to do; nothing is changed):

- tag names are folded: trimmed, lower case, at most ``MAX_TAG`` characters, no control
  characters or commas. Adding a tag the ticket has, or removing one it lacks, is no
  change. A tag outside the vocabulary is refused unless the deployment allows free tags
  (``TICKET_SERVER_FREE_TAGS``): then it joins the vocabulary. An inactive tag cannot be
  added; it can be removed. A ticket holds at most ``MAX_TICKET_TAGS`` tags.
- a field is named by its definition's ``name``; its value must have the field's type
  (text: a string; number: a JSON number; date: ``YYYY-MM-DD``; enum: one of its values,
  case ignored; boolean: true or false); null clears it. A field applies to the tickets of
  its queues only (all queues when it names none). A required field cannot be cleared,
  and a ticket being opened must have every required field of its queue. A ticket's
  values take at most ``MAX_FIELDS_BYTES`` together (so that a whole-ticket read fits).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, delete, exists, insert, select

from ticket_server.tickets.analyzer import fold
from ticket_server.tickets.classification_models import (
    VALUE_COLUMN,
    CustomField,
    FieldType,
    Tag,
    TicketFieldValue,
    TicketTag,
)
from ticket_server.tickets.domain import NoChange, WriteRefused
from ticket_server.tickets.models import Ticket

MAX_TAG = 64
MAX_TICKET_TAGS = 30
MAX_FIELD_TEXT = 1000
MAX_FIELD_NAME = 64
MAX_FIELDS_BYTES = 4000
"""A ticket's field values together, as JSON: what a read of the whole ticket has room for."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # tab and newline allowed
FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_TAGS, _TICKET_TAGS = Tag.__table__, TicketTag.__table__
_FIELDS, _VALUES = CustomField.__table__, TicketFieldValue.__table__
Value = str | float | bool | None


class ClassificationRefused(WriteRefused):
    """A tag or field change the vocabulary or the definitions refuse."""

    reason = "classification refused"


class TagNotAllowed(ClassificationRefused):
    reason = "tag not in vocabulary"


class UnknownField(ClassificationRefused):
    reason = "unknown field"


class InvalidFieldValue(ClassificationRefused):
    reason = "invalid field value"


class RequiredFieldMissing(ClassificationRefused):
    reason = "required field missing"


def fold_tag(name: str) -> str:
    """The tag ``name`` as stored: trimmed and lower case; ``ClassificationRefused`` for
    an empty name, one over ``MAX_TAG`` characters, or one with a control character or
    a comma."""
    folded = name.strip().lower()
    if not folded or len(folded) > MAX_TAG or _CONTROL.search(folded) or "," in folded:
        raise ClassificationRefused(
            f"Tag {name[:MAX_TAG]!r} is not a tag name: use 1 to {MAX_TAG} characters without "
            "control characters or commas (case is ignored). Nothing was changed."
        )
    return folded


def fold_field_name(name: str) -> str:
    """A field name as defined: trimmed, lower case, ``FIELD_NAME``'s alphabet."""
    folded = name.strip().lower()
    if not FIELD_NAME.match(folded):
        raise UnknownField(
            f"{name[:MAX_FIELD_NAME]!r} is not a field name: names are 1 to 64 of a-z, 0-9 "
            "and '_', starting with a letter. Nothing was changed."
        )
    return folded


@dataclass(frozen=True)
class FieldDefinition:
    id: int
    name: str
    label: str
    type: FieldType
    enum_values: tuple[str, ...]
    required: bool
    queues: tuple[str, ...] | None
    active: bool

    def applies_to(self, queue: str) -> bool:
        return self.queues is None or fold(queue) in {fold(q) for q in self.queues}

    def describe(self) -> str:
        kind = (
            f"enum of {', '.join(self.enum_values)}" if self.type is FieldType.ENUM else self.type
        )
        return f"{self.name} ({kind}{', required' if self.required else ''})"


def definition_from_row(row: Mapping[Any, Any]) -> FieldDefinition:
    return FieldDefinition(
        id=row["id"],
        name=row["name"],
        label=row["label"],
        type=FieldType(row["type"]),
        enum_values=tuple(json.loads(row["enum_values"])) if row["enum_values"] else (),
        required=bool(row["required"]),
        queues=tuple(json.loads(row["queues"])) if row["queues"] else None,
        active=bool(row["active"]),
    )


def field_definitions(conn: Connection, *, active_only: bool = True) -> list[FieldDefinition]:
    """The deployment's field definitions by name (the active ones unless told)."""
    stmt = select(_FIELDS).order_by(_FIELDS.c.name)
    if active_only:
        stmt = stmt.where(_FIELDS.c.active.is_(True))
    return [definition_from_row(r) for r in conn.execute(stmt).mappings()]


@dataclass(frozen=True)
class ClassificationChange:
    """Tags to add and to remove, and field values by name (None clears a field)."""

    add_tags: Sequence[str] = ()
    remove_tags: Sequence[str] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Classification:
    """A ticket's tags (sorted) and custom field values by field name (JSON values)."""

    tags: tuple[str, ...] = ()
    custom_fields: Mapping[str, Value] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"tags": list(self.tags), "custom_fields": dict(sorted(self.custom_fields.items()))}


@dataclass(frozen=True)
class ClassificationDiff:
    before: Classification
    after: Classification

    def audit(self) -> dict[str, dict[str, Any]]:
        """The changed parts, as an audit row's ``before``/``after`` keep them."""
        before: dict[str, Any] = {}
        after: dict[str, Any] = {}
        if self.before.tags != self.after.tags:
            before["tags"], after["tags"] = list(self.before.tags), list(self.after.tags)
        names = sorted(set(self.before.custom_fields) | set(self.after.custom_fields))
        changed = [
            n for n in names if self.before.custom_fields.get(n) != self.after.custom_fields.get(n)
        ]
        if changed:
            before["custom_fields"] = {n: self.before.custom_fields.get(n) for n in changed}
            after["custom_fields"] = {n: self.after.custom_fields.get(n) for n in changed}
        return {"before": before, "after": after}


def json_value(kind: FieldType, row: Mapping[Any, Any]) -> Value:
    """A stored value as JSON: numbers whole where they are, dates ``YYYY-MM-DD``."""
    value = row[VALUE_COLUMN[kind]]
    if kind is FieldType.NUMBER and value is not None:
        number = float(value)
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind is FieldType.DATE and value is not None:
        return value.isoformat() if isinstance(value, date) else str(value)[:10]
    if kind is FieldType.BOOLEAN and value is not None:
        return bool(value)
    return value  # type: ignore[no-any-return]


def read_classification(conn: Connection, ticket_pks: Iterable[int]) -> dict[int, Classification]:
    """The tags and field values of each of ``ticket_pks`` (every ticket asked for is a
    key; one without any has empty ones). Inactive tags and fields still show."""
    pks = sorted(set(ticket_pks))
    if not pks:
        return {}
    tags: dict[int, list[str]] = {pk: [] for pk in pks}
    for pk, name in conn.execute(
        select(_TICKET_TAGS.c.ticket_pk, _TAGS.c.name)
        .join(_TAGS, _TAGS.c.id == _TICKET_TAGS.c.tag_id)
        .where(_TICKET_TAGS.c.ticket_pk.in_(pks))
    ):
        tags[pk].append(name)
    values: dict[int, dict[str, Value]] = {pk: {} for pk in pks}
    for row in conn.execute(
        select(_VALUES, _FIELDS.c.name, _FIELDS.c.type)
        .join(_FIELDS, _FIELDS.c.id == _VALUES.c.field_id)
        .where(_VALUES.c.ticket_pk.in_(pks))
    ).mappings():
        values[row["ticket_pk"]][row["name"]] = json_value(FieldType(row["type"]), row)
    return {
        pk: Classification(tuple(sorted(tags[pk])), dict(sorted(values[pk].items()))) for pk in pks
    }


def coerce(definition: FieldDefinition, value: Any) -> Value:
    """``value`` as the field's type (an enum value in its defined spelling), or
    ``InvalidFieldValue`` saying what the field takes."""
    kind = definition.type

    def refuse(wanted: str) -> InvalidFieldValue:
        shown = json.dumps(value, ensure_ascii=False, default=str)[:80]
        return InvalidFieldValue(
            f"Field {definition.name} is {wanted}; {shown} is not. Nothing was changed."
        )

    if kind is FieldType.BOOLEAN:
        if not isinstance(value, bool):
            raise refuse("a boolean (true or false)")
        return value
    if kind is FieldType.NUMBER:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise refuse("a number (a JSON number, not a string)")
        number = float(value)
        if not math.isfinite(number):
            raise refuse("a finite number")
        return number
    if not isinstance(value, str):
        raise refuse(
            {
                FieldType.TEXT: "text (a string)",
                FieldType.DATE: "a date (a string YYYY-MM-DD)",
                FieldType.ENUM: f"one of {', '.join(definition.enum_values)}",
            }[kind]
        )
    if kind is FieldType.DATE:
        try:
            if len(value.strip()) != 10:
                raise ValueError(value)
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            raise refuse("a date YYYY-MM-DD") from None
    if kind is FieldType.ENUM:
        wanted = value.strip().lower()
        for allowed in definition.enum_values:
            if allowed.lower() == wanted:
                return allowed
        raise InvalidFieldValue(
            f"Field {definition.name} takes one of {', '.join(definition.enum_values)}; "
            f"{value[:80]!r} is not among them. Nothing was changed."
        )
    if not value.strip() or len(value) > MAX_FIELD_TEXT or _TEXT_CONTROL.search(value):
        raise refuse(f"text of 1 to {MAX_FIELD_TEXT} characters without control characters")
    return value


def _stored(kind: FieldType, value: Value) -> dict[str, Any]:
    column = VALUE_COLUMN[kind]
    stored: Any = date.fromisoformat(value) if kind is FieldType.DATE else value  # type: ignore[arg-type]
    return {column: stored}


def apply_classification(
    conn: Connection,
    ticket_pk: int,
    queue: str,
    change: ClassificationChange,
    *,
    free_tags: bool,
    now: datetime | None,
    opening: bool = False,
) -> ClassificationDiff:
    """Check ``change`` to the ticket ``ticket_pk`` (in ``queue``) and, when ``now`` is
    given, make it in ``conn``'s transaction (free tags join the vocabulary then).
    ``opening``: the ticket is being opened (it has no tags or values yet, so none are
    read), every required field of its queue must have a value and an empty change is no
    refusal. Returns the ticket's classification
    before and after; ``NoChange`` when nothing would change (not when opening);
    ``ClassificationRefused`` as the module docstring says."""
    adding = list(dict.fromkeys(fold_tag(t) for t in change.add_tags))
    removing = list(dict.fromkeys(fold_tag(t) for t in change.remove_tags))
    both = sorted(set(adding) & set(removing))
    if both:
        raise ClassificationRefused(
            f"Tag {both[0]!r} is both added and removed; name it once. Nothing was changed."
        )
    before = (
        Classification((), {}) if opening else read_classification(conn, [ticket_pk])[ticket_pk]
    )
    named = adding + removing
    tag_rows = (
        conn.execute(
            select(_TAGS.c.id, _TAGS.c.name, _TAGS.c.active).where(_TAGS.c.name.in_(named))
        )
        if named
        else ()
    )
    known = {r.name: r for r in tag_rows}
    new_tags = [t for t in adding if t not in before.tags]
    for tag in new_tags:
        row = known.get(tag)
        if row is not None and not row.active:
            raise TagNotAllowed(
                f"Tag {tag!r} is deactivated and cannot be added (it may be removed). Nothing "
                "was changed."
            )
        if row is None and not free_tags:
            vocabulary = conn.execute(
                select(_TAGS.c.name)
                .where(_TAGS.c.active.is_(True))
                .order_by(_TAGS.c.name)
                .limit(30)
            ).scalars()
            raise TagNotAllowed(
                f"Tag {tag!r} is not in this deployment's vocabulary (free tags are off); use one "
                f"of: {', '.join(vocabulary) or 'none defined'}. Nothing was changed."
            )
    gone = [t for t in removing if t in before.tags]
    tags = tuple(sorted((set(before.tags) | set(new_tags)) - set(gone)))
    if len(tags) > MAX_TICKET_TAGS:
        raise ClassificationRefused(
            f"A ticket holds at most {MAX_TICKET_TAGS} tags; this change would leave {len(tags)}. "
            "Remove some first. Nothing was changed."
        )

    every = {d.name: d for d in field_definitions(conn, active_only=False)}
    definitions = {name: d for name, d in every.items() if d.active}
    applicable = [d for d in definitions.values() if d.applies_to(queue)]
    values = dict(before.custom_fields)
    chosen: dict[str, tuple[FieldDefinition, Value]] = {}
    for name, raw in change.fields.items():
        definition = definitions.get(fold_field_name(name))
        if definition is None and fold_field_name(name) in every:
            raise UnknownField(
                f"Field {fold_field_name(name)} is deactivated: it can no longer be set or "
                "cleared. Nothing was changed."
            )
        if definition is None:
            fields = ", ".join(d.describe() for d in applicable) or "none"
            raise UnknownField(
                f"There is no field {name[:MAX_FIELD_NAME]!r}; the fields of queue {queue} are: "
                f"{fields}. Nothing was changed."
            )
        if not definition.applies_to(queue):
            raise UnknownField(
                f"Field {definition.name} does not apply to tickets of queue {queue} (only "
                f"{', '.join(definition.queues or ())}). Nothing was changed."
            )
        if raw is None and definition.required:
            raise RequiredFieldMissing(
                f"Field {definition.name} is required for tickets of queue {queue}: it cannot "
                "be cleared; set another value instead. Nothing was changed."
            )
        value = None if raw is None else coerce(definition, raw)
        chosen[definition.name] = (definition, value)
        if value is None:
            values.pop(definition.name, None)
        else:
            values[definition.name] = json_value(definition.type, _stored(definition.type, value))
    if opening:
        missing = [d.name for d in applicable if d.required and d.name not in values]
        if missing:
            raise RequiredFieldMissing(
                f"Tickets of queue {queue} need the required field(s) {', '.join(missing)}; "
                "give them in custom_fields. Nothing was changed."
            )
    after = Classification(tags, dict(sorted(values.items())))
    held = len(json.dumps(after.custom_fields, ensure_ascii=False).encode())
    if held > MAX_FIELDS_BYTES and held > len(json.dumps(before.custom_fields).encode()):
        raise InvalidFieldValue(
            f"A ticket's custom fields hold at most {MAX_FIELDS_BYTES} bytes of JSON together; "
            f"these values would take {held}. Shorten the text. Nothing was changed."
        )
    if after == before and not opening:
        raise NoChange("The ticket already has these tags and field values; nothing was changed.")
    if now is None:
        return ClassificationDiff(before, after)

    for tag in new_tags:
        if tag not in known:  # free tags: it joins the vocabulary
            inserted = conn.execute(
                insert(_TAGS).values(name=tag, description="", active=True, created_at=now)
            ).inserted_primary_key
            assert inserted is not None
            known[tag] = conn.execute(
                select(_TAGS.c.id, _TAGS.c.name, _TAGS.c.active).where(_TAGS.c.id == inserted[0])
            ).one()
    if new_tags:
        conn.execute(
            insert(_TICKET_TAGS),
            [{"ticket_pk": ticket_pk, "tag_id": known[t].id} for t in new_tags],
        )
    if gone:
        conn.execute(
            delete(_TICKET_TAGS).where(
                _TICKET_TAGS.c.ticket_pk == ticket_pk,
                _TICKET_TAGS.c.tag_id.in_([known[t].id for t in gone]),
            )
        )
    for definition, value in chosen.values():
        if not opening:
            conn.execute(
                delete(_VALUES).where(
                    _VALUES.c.ticket_pk == ticket_pk, _VALUES.c.field_id == definition.id
                )
            )
        if value is not None:
            conn.execute(
                insert(_VALUES).values(
                    ticket_pk=ticket_pk, field_id=definition.id, **_stored(definition.type, value)
                )
            )
    return ClassificationDiff(before, after)


def search_conditions(
    tags: Sequence[int] | None, fields: Sequence[tuple[int, str, Any]] | None
) -> dict[str, ColumnElement[bool]]:
    """A search's conditions on ``tickets``, by argument name: the ticket has every tag
    of ``tags`` (ids), and each field of ``fields`` (id, value column, value) equal to
    the value. Each is an EXISTS on the primary key of ``ticket_tags`` or
    ``ticket_field_values``, one indexed probe per ticket looked at."""
    out: dict[str, ColumnElement[bool]] = {}
    if tags:
        out["tags"] = and_(
            *(
                exists().where(_TICKET_TAGS.c.ticket_pk == Ticket.pk, _TICKET_TAGS.c.tag_id == t)
                for t in tags
            )
        )
    if fields:
        out["fields"] = and_(
            *(
                exists().where(
                    _VALUES.c.ticket_pk == Ticket.pk,
                    _VALUES.c.field_id == field_id,
                    _VALUES.c[column] == value,
                )
                for field_id, column, value in fields
            )
        )
    return out
