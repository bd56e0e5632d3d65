"""SQLAlchemy 2 typed ORM models: tickets, their customers, comments and history."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import (
    Boolean,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Table,
    Text,
    false,
    true,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from ticket_server.tickets.domain import (
    AuthorType,
    EventField,
    LinkType,
    TicketPriority,
    TicketStatus,
    Visibility,
)

__all__ = [
    "Base",
    "Comment",
    "Customer",
    "Queue",
    "Requester",
    "SearchPosting",
    "SearchTerm",
    "SearchTermDelta",
    "SlaCalendar",
    "SlaTarget",
    "Ticket",
    "TicketEvent",
    "TicketLink",
    "TicketPriority",
    "TicketStatus",
    "UTCDateTime",
    "WriteRequest",
]


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
    if TYPE_CHECKING:
        # Every model here is mapped to one Table (never a join or a select), so its
        # __table__ has insert(), update() and delete(); SQLAlchemy types it FromClause.
        __table__: ClassVar[Table]


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
    implicit rowid may be renumbered by VACUUM) and search cursors can key on it.

    ``queue`` is a ``Queue.name`` and ``customer`` the organisation's name
    (``Customer.name``), both foreign keys (revision 0012). ``version`` counts
    changes for optimistic concurrency: SQLAlchemy's ``version_id_col`` makes every ORM
    update check and increment it (a stale write raises ``StaleDataError``); a Core
    update must do the same with ``WHERE version = :expected``.
    """

    __tablename__ = "tickets"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True, index=True)
    subject: Mapped[str] = mapped_column(String(300))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[TicketStatus] = mapped_column(_enum(TicketStatus, "ticket_status"))
    priority: Mapped[TicketPriority] = mapped_column(_enum(TicketPriority, "ticket_priority"))
    owner: Mapped[str | None] = mapped_column(String(64))
    queue: Mapped[str] = mapped_column(
        String(64), ForeignKey("queues.name", name="fk_tickets_queue")
    )
    customer: Mapped[str] = mapped_column(
        String(200), ForeignKey("customers.name", name="fk_tickets_customer")
    )
    # The person at the customer who asked (a contact of ``customer``); null for tickets
    # older than revision 0012, which named the organisation only.
    requester_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("requesters.id", name="fk_tickets_requester")
    )
    # How the request arrived (``tools.opening.Channel``: email, phone, chat, web, api);
    # null for tickets older than revision 0012.
    channel: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # Subject and body as the search analyzer's tokens (tickets.analyzer.search_text),
    # written with them by the repository; the full-text indexes are built on these.
    search_subject: Mapped[str] = mapped_column(Text, server_default=" ")
    search_body: Mapped[str] = mapped_column(Text, server_default=" ")
    # The SLA state as stored facts make it, written with every change of those facts
    # (tickets.sla_store.refresh): whether a target applies (null: not yet derived), the
    # next due time of a clock not yet met, and the moment the ticket is (or, with no
    # further change, will be) breached. ``sla_breach_at <= now``: breached now.
    sla_covered: Mapped[bool | None] = mapped_column(Boolean)
    sla_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    sla_breach_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __mapper_args__ = {"version_id_col": version}
    __table_args__ = (
        Index("ix_tickets_updated_at", "updated_at", "pk"),
        Index("ix_tickets_queue_updated_at", "queue", "updated_at"),
        Index("ix_tickets_status", "status"),
        Index("ix_tickets_owner", "owner"),
        Index("ix_tickets_customer_updated_at", "customer", "updated_at"),
        Index("ix_tickets_sla_due_at", "sla_due_at"),
        # count_tickets' tickets whose age or breach still moves with the clock, read
        # from these two indexes alone (revision 0026: tickets.counts).
        Index("ix_tickets_sla_breach_at", "sla_breach_at", "status", "queue", "priority", "owner"),
        Index("ix_tickets_created_at", "created_at", "status", "queue", "priority", "owner"),
        # ix_tickets_counts (count_tickets' GROUP BY read from the index alone) differs by
        # engine, so the revisions manage it by hand: 0018, 0024 (PostgreSQL) and 0025
        # (SQLite, over integer copies of created_at and sla_breach_at kept by triggers).
        # A ticket's queue and status by its key without reading its row (which holds the
        # body): find_similar_tickets tests its candidates' scope here (revision 0020).
        Index("ix_tickets_scope", "pk", "queue", "status"),
    )


class _Tally:
    """The columns of a ticket tally: a group of tickets (``owner`` '' for unassigned)
    and, among them, how many there are, how many have SLA columns derived
    (``sla_covered`` not null), how many no target covers (false), and how many have a
    breach moment (``sla_breach_at`` not null)."""

    status: Mapped[str] = mapped_column(String(32), primary_key=True)
    queue: Mapped[str] = mapped_column(String(64), primary_key=True)
    priority: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    tickets: Mapped[int] = mapped_column(Integer)
    covered: Mapped[int] = mapped_column(Integer)
    without_sla: Mapped[int] = mapped_column(Integer)
    breaching: Mapped[int] = mapped_column(Integer)


class TicketCount(_Tally, Base):
    """Every ticket counted once, by its group: the folded part of the tallies
    ``count_tickets`` reads (``tickets.counts``). Triggers on ``tickets`` append each
    change to ``TicketCountDelta`` (revision 0026), so no write waits on a group's row."""

    __tablename__ = "ticket_counts"


class TicketCountDelta(_Tally, Base):
    """A change to ``ticket_counts`` not yet folded into it (+1 for a group a ticket
    joined, -1 for the one it left); a group's tallies are its ``ticket_counts`` row
    plus its rows here."""

    __tablename__ = "ticket_count_deltas"
    # Read by status, so that a count does not read every page a rewrite of every ticket
    # left (up to two rows per ticket, folded since, but not given back to the file).
    __table_args__ = (Index("ix_ticket_count_deltas_status", "status"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    status: Mapped[str] = mapped_column(String(32))
    queue: Mapped[str] = mapped_column(String(64))
    priority: Mapped[str] = mapped_column(String(32))
    owner: Mapped[str] = mapped_column(String(64))


class Customer(Base):
    """An organisation that raises tickets. ``id`` is the public key (``CUS-1000``);
    ``name`` is what ``Ticket.customer`` holds. No personal data: people appear only
    as comment authors and in ticket text."""

    __tablename__ = "customers"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True, index=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, index=True)
    plan: Mapped[str] = mapped_column(String(32))
    region: Mapped[str] = mapped_column(String(32))
    billing_reference: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Comment(Base):
    """One message on a ticket's conversation: a public reply (the customer sees it) or
    an internal note, by the customer, an agent or the system. The ticket's ``body`` is
    its first message and is not repeated here."""

    __tablename__ = "comments"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ticket_id: Mapped[str] = mapped_column(String(32), ForeignKey("tickets.id", ondelete="CASCADE"))
    author: Mapped[str] = mapped_column(String(200))
    author_type: Mapped[AuthorType] = mapped_column(_enum(AuthorType, "author_type"))
    visibility: Mapped[Visibility] = mapped_column(_enum(Visibility, "comment_visibility"))
    body: Mapped[str] = mapped_column(Text)
    # Written through a caller whose kind is "assistant" (``author`` names that caller);
    # reads show such a comment's author_type as "assistant".
    by_assistant: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # The body as the search analyzer's tokens, written with it (tickets.search.comment_search_bodies);
    # the full-text indexes of comments are built on it.
    search_body: Mapped[str] = mapped_column(Text, server_default=" ")
    # The ticket this comment was on before a merge moved it here (null: written here).
    merged_from: Mapped[str | None] = mapped_column(String(32))

    __table_args__ = (Index("ix_comments_ticket_created_at", "ticket_id", "created_at", "pk"),)


class TicketEvent(Base):
    """One change to one field of a ticket (its history), append-only: a write that
    changes status and owner appends two events. ``old_value``/``new_value`` are the
    field's values as text (null: unset, e.g. no owner)."""

    __tablename__ = "ticket_events"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ticket_id: Mapped[str] = mapped_column(String(32), ForeignKey("tickets.id", ondelete="CASCADE"))
    field: Mapped[EventField] = mapped_column(_enum(EventField, "event_field"))
    old_value: Mapped[str | None] = mapped_column(String(64))
    new_value: Mapped[str | None] = mapped_column(String(64))
    actor: Mapped[str] = mapped_column(String(200))
    actor_type: Mapped[AuthorType] = mapped_column(_enum(AuthorType, "author_type"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # Made through a caller whose kind is "assistant" (``actor`` names that caller).
    by_assistant: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    __table_args__ = (Index("ix_ticket_events_ticket_created_at", "ticket_id", "created_at", "pk"),)


class SearchTerm(Base):
    """How many tickets hold each search token (their subject or body analyzed), and how
    many comments (their body analyzed), for the weight of a query word and for spelling
    suggestions. The row with the empty term counts the tickets and comments indexed."""

    __tablename__ = "search_terms"

    term: Mapped[str] = mapped_column(String(64), primary_key=True)
    tickets: Mapped[int] = mapped_column(Integer)
    comments: Mapped[int] = mapped_column(Integer, server_default="0")


class SearchTermDelta(Base):
    """A change to ``search_terms`` not yet added to it: what one write did to how many
    tickets and comments hold ``term``. Writes append rows here, in their own
    transaction, instead of updating the shared ``search_terms`` row of each word (which
    made writers to different tickets wait on each other's row locks); a word's counts
    are its ``search_terms`` row plus its rows here, and ``fold_term_deltas`` adds these
    rows to ``search_terms`` outside any write's transaction."""

    __tablename__ = "search_term_deltas"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    term: Mapped[str] = mapped_column(String(64))
    tickets: Mapped[int] = mapped_column(Integer)
    comments: Mapped[int] = mapped_column(Integer)

    __table_args__ = (Index("ix_search_term_deltas_term", "term"),)


class SearchPosting(Base):
    """One search token of one ticket, kept in the order a relevance search reads a
    word's holders (``tickets.search``): by token, then ``impact`` (2 when the subject
    holds it + 1 when the body does: the ticket's score for the word, before the word's
    weight), then the ticket's ``created_at`` and key, newest last in the index and read
    backwards. Written with the ticket's text only (a status change writes none).
    Revision 0017 made it in place of ``search_postings`` (keyed by ``updated_at``),
    which 0019 drops."""

    __tablename__ = "ticket_search_postings"

    term: Mapped[str] = mapped_column(String(64), primary_key=True)
    impact: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    ticket_pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)

    # SQLite: the table is its primary key's B-tree (no rowid and second copy).
    __table_args__ = {"sqlite_with_rowid": False}


class WriteRequest(Base):
    """A write made with an idempotency key: per caller and key, the SHA-256 of the
    request (tool and arguments) and the result it produced (JSON), so a retry returns
    that result and writes nothing."""

    __tablename__ = "write_requests"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    caller: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str] = mapped_column(String(128))
    tool: Mapped[str] = mapped_column(String(128))
    request_sha256: Mapped[str] = mapped_column(String(64))
    ticket_id: Mapped[str] = mapped_column(String(32))
    result: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_write_requests_caller_key", "caller", "idempotency_key", unique=True),
    )


class Queue(Base):
    """A queue tickets belong to (revision 0012): ``name`` is the key tickets hold (lower
    case, as written by the operator command), ``display_name`` what people read. An
    inactive queue keeps its tickets but takes no new or moved ones."""

    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    display_name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, server_default="")
    time_zone: Mapped[str] = mapped_column(String(64), server_default="UTC")
    active: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Requester(Base):
    """A customer organisation's contact who raises tickets (revision 0012): a name and
    an e-mail address (stored folded to lower case, unique), nothing more personal.
    ``id`` is the public key (``REQ-1000``)."""

    __tablename__ = "requesters"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True, index=True)
    name: Mapped[str] = mapped_column(String(200))
    email: Mapped[str] = mapped_column(String(254), unique=True, index=True)
    customer_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("customers.id", name="fk_requesters_customer")
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class SlaCalendar(Base):
    """The SLA calendar and pause rule of one queue, by the queue's name (``*``: every
    queue without a row of its own), as ``ticket-server sla load`` stored it: an IANA
    time zone, weekly working hours as JSON (``{"mon": ["09:00-17:00"], ...}``, local
    time), holidays as a JSON list of ISO dates and as a holiday calendar's code (the
    ``holidays`` library's country and subdivision, e.g. ``DE-BY``; null: none), and the
    statuses that pause the clock (JSON list). ``tickets.sla`` reads it at every SLA read."""

    __tablename__ = "sla_calendars"

    queue: Mapped[str] = mapped_column(String(64), primary_key=True)
    time_zone: Mapped[str] = mapped_column(String(64))
    hours: Mapped[str] = mapped_column(Text)
    holidays: Mapped[str] = mapped_column(Text)
    holiday_calendar: Mapped[str | None] = mapped_column(String(16))
    pause_statuses: Mapped[str] = mapped_column(Text)


class SlaTarget(Base):
    """First-response and resolution targets of a queue (``*``: the default) and
    priority, in business minutes of the queue's calendar (null: no target)."""

    __tablename__ = "sla_targets"

    queue: Mapped[str] = mapped_column(String(64), primary_key=True)
    priority: Mapped[TicketPriority] = mapped_column(
        _enum(TicketPriority, "sla_target_priority"), primary_key=True
    )
    first_response_minutes: Mapped[int | None] = mapped_column(Integer)
    resolution_minutes: Mapped[int | None] = mapped_column(Integer)


class SlaPlanTarget(Base):
    """A queue's (``*``: the default's) targets for the tickets of customers on one
    ``plan`` (``Customer.plan``, compared case-insensitively), in place of its
    ``SlaTarget`` for that priority, in business minutes (null: no target)."""

    __tablename__ = "sla_plan_targets"

    queue: Mapped[str] = mapped_column(String(64), primary_key=True)
    plan: Mapped[str] = mapped_column(String(32), primary_key=True)
    priority: Mapped[TicketPriority] = mapped_column(
        _enum(TicketPriority, "sla_plan_target_priority"), primary_key=True
    )
    first_response_minutes: Mapped[int | None] = mapped_column(Integer)
    resolution_minutes: Mapped[int | None] = mapped_column(Integer)


class TicketLink(Base):
    """A typed relation between two tickets, stored once from ``ticket_id``'s side
    (``LinkType``); the other ticket reads it as the inverse (``INVERSE_LINKS``)."""

    __tablename__ = "ticket_links"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ticket_id: Mapped[str] = mapped_column(String(32), ForeignKey("tickets.id", ondelete="CASCADE"))
    other_id: Mapped[str] = mapped_column(String(32), ForeignKey("tickets.id", ondelete="CASCADE"))
    type: Mapped[LinkType] = mapped_column(_enum(LinkType, "link_type"))
    actor: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_ticket_links_ticket_other_type", "ticket_id", "other_id", "type", unique=True),
        Index("ix_ticket_links_other", "other_id"),
    )
