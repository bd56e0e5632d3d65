"""SQLAlchemy 2 typed ORM model of a ticket."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import DateTime, Enum, Index, Integer, String, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from ticket_server.tickets.domain import TicketPriority, TicketStatus


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every engine.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so values are stored
    as naive UTC and given ``tzinfo=UTC`` again on the way out. Naive input is refused.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: ticket timestamps must be timezone-aware")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    pass


def _enum(enum: type[StrEnum], name: str) -> Enum:
    # VARCHAR + CHECK on every engine: adding a value later is a plain migration.
    return Enum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=32,
        values_callable=lambda e: [m.value for m in e],
        validate_strings=True,
    )


class Ticket(Base):
    """A support ticket. ``id`` is the public key (``SUP-4412``); ``pk`` is an internal
    integer key that never changes, so SQLite's FTS5 index can follow rows by it (an
    implicit rowid may be renumbered by VACUUM) and search cursors can key on it."""

    __tablename__ = "tickets"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True, index=True)
    subject: Mapped[str] = mapped_column(String(300))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[TicketStatus] = mapped_column(_enum(TicketStatus, "ticket_status"))
    priority: Mapped[TicketPriority] = mapped_column(_enum(TicketPriority, "ticket_priority"))
    owner: Mapped[str | None] = mapped_column(String(64))
    queue: Mapped[str] = mapped_column(String(64))
    customer: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # Subject and body as the search analyzer's tokens (tickets.analyzer.search_text),
    # written with them by the repository; the full-text indexes are built on these.
    search_subject: Mapped[str] = mapped_column(Text, server_default=" ")
    search_body: Mapped[str] = mapped_column(Text, server_default=" ")

    __table_args__ = (
        Index("ix_tickets_updated_at", "updated_at", "pk"),
        Index("ix_tickets_queue_updated_at", "queue", "updated_at"),
        Index("ix_tickets_status", "status"),
        Index("ix_tickets_owner", "owner"),
    )


class SearchTerm(Base):
    """How many tickets hold each search token (their subject or body analyzed), for
    the weight of a query word and for spelling suggestions. The row with the empty
    term counts the tickets indexed."""

    __tablename__ = "search_terms"

    term: Mapped[str] = mapped_column(String(64), primary_key=True)
    tickets: Mapped[int] = mapped_column(Integer)
