"""Tables of a ticket's classification: the deployment's tag vocabulary and its custom
field definitions, and each ticket's tags and field values (revision 0013_tags_fields).

A field's values live in one table with one typed column per kind of value
(``value_text`` for text and enum, ``value_number``, ``value_date``, ``value_bool``):
one row per ticket and field, so a ticket's fields are one indexed read, a write is one
upsert whatever the type, and a search filter compares the column of the field's type
through its own index (a table per type would need a union for every read; a single
text column would compare numbers and dates as strings). The definition says which
column holds a field's value; exactly one is set (CHECK ``ck_field_value_one``).
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Date,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from ticket_server.tickets.models import Base, UTCDateTime


class FieldType(StrEnum):
    TEXT = "text"
    NUMBER = "number"
    DATE = "date"
    ENUM = "enum"
    BOOLEAN = "boolean"


VALUE_COLUMN = {
    FieldType.TEXT: "value_text",
    FieldType.ENUM: "value_text",
    FieldType.NUMBER: "value_number",
    FieldType.DATE: "value_date",
    FieldType.BOOLEAN: "value_bool",
}
"""The column of ``ticket_field_values`` that holds a field's value, by its type."""


class Tag(Base):
    """A tag of the deployment's vocabulary. ``name`` is folded (lower case, trimmed); an
    inactive tag stays on the tickets that have it and cannot be added any more."""

    __tablename__ = "tags"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(300), server_default="")
    active: Mapped[bool] = mapped_column(Boolean, server_default="1")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class TicketTag(Base):
    """One tag on one ticket."""

    __tablename__ = "ticket_tags"

    ticket_pk: Mapped[int] = mapped_column(
        Integer, ForeignKey("tickets.pk", ondelete="CASCADE"), primary_key=True
    )
    tag_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("tags.id", ondelete="RESTRICT"), primary_key=True
    )

    __table_args__ = (Index("ix_ticket_tags_tag_ticket", "tag_id", "ticket_pk"),)


class CustomField(Base):
    """A custom field the deployment defines (``ticket-server fields add|load``), never a
    caller. ``enum_values``: the allowed values of an enum field, a JSON list; ``queues``:
    the queues whose tickets have the field, a JSON list (null: every queue).
    ``required``: a ticket of those queues must have a value: it is refused when it
    opens without one, and a value cannot be cleared."""

    __tablename__ = "custom_fields"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(200))
    type: Mapped[FieldType] = mapped_column(
        Enum(
            FieldType,
            name="custom_field_type",
            native_enum=False,
            create_constraint=True,
            length=16,
            values_callable=lambda e: [m.value for m in e],
            validate_strings=True,
        )
    )
    enum_values: Mapped[str | None] = mapped_column(Text)
    required: Mapped[bool] = mapped_column(Boolean, server_default="0")
    queues: Mapped[str | None] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(Boolean, server_default="1")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class TicketFieldValue(Base):
    """One custom field's value on one ticket, in the column of the field's type."""

    __tablename__ = "ticket_field_values"

    ticket_pk: Mapped[int] = mapped_column(
        Integer, ForeignKey("tickets.pk", ondelete="CASCADE"), primary_key=True
    )
    field_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("custom_fields.id", ondelete="RESTRICT"), primary_key=True
    )
    value_text: Mapped[str | None] = mapped_column(String(1000))
    value_number: Mapped[float | None] = mapped_column(Float)
    value_date: Mapped[date | None] = mapped_column(Date)
    value_bool: Mapped[bool | None] = mapped_column(Boolean)

    __table_args__ = (
        CheckConstraint(
            "(CASE WHEN value_text IS NULL THEN 0 ELSE 1 END"
            " + CASE WHEN value_number IS NULL THEN 0 ELSE 1 END"
            " + CASE WHEN value_date IS NULL THEN 0 ELSE 1 END"
            " + CASE WHEN value_bool IS NULL THEN 0 ELSE 1 END) = 1",
            name="ck_field_value_one",
        ),
        Index("ix_ticket_field_values_text", "field_id", "value_text"),
        Index("ix_ticket_field_values_number", "field_id", "value_number"),
        Index("ix_ticket_field_values_date", "field_id", "value_date"),
    )
