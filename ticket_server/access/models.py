"""ORM models of the access tables, on the tickets' ``Base`` metadata (one metadata
for Alembic). The schema itself is revision ``0003_access``."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Enum, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ticket_server.tickets.models import Base, UTCDateTime

OUTCOMES = ("ok", "tool_error", "denied", "rate_limited", "cancelled")


class CallerRow(Base):
    """A caller: who may call which tools, on which queues, how fast. Only the
    SHA-256 of the token is stored; scopes and queues are space-separated."""

    __tablename__ = "callers"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64))
    token_sha256: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[str] = mapped_column(Text)
    queues: Mapped[str | None] = mapped_column(Text)
    # Where tickets:write applies, space-separated (null: every queue it may read).
    write_queues: Mapped[str | None] = mapped_column(Text)
    # Writes needing a person's confirmation for this caller (null: the deployment's list).
    confirm_writes: Mapped[str | None] = mapped_column(Text)
    # The toolsets this caller's model is offered, space-separated (null: the deployment's).
    toolsets: Mapped[str | None] = mapped_column(Text)
    tool_rate_limit: Mapped[str | None] = mapped_column(String(64))
    # "person" or "assistant" (revision 0012): what an assistant writes is labelled so.
    kind: Mapped[str] = mapped_column(String(16), server_default="person")
    http_rate_limit: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_callers_name", "name", unique=True),
        Index("ix_callers_token_sha256", "token_sha256", unique=True),
    )


class AuditEvent(Base):
    """One tools/call: who, what, how it ended, how big, how long."""

    __tablename__ = "audit_events"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[datetime] = mapped_column(UTCDateTime())
    trace_id: Mapped[str] = mapped_column(String(32))
    caller: Mapped[str | None] = mapped_column(String(64))
    transport: Mapped[str] = mapped_column(String(32))
    protocol_version: Mapped[str | None] = mapped_column(String(32))
    tool: Mapped[str] = mapped_column(String(128))
    arguments: Mapped[str] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(
        Enum(*OUTCOMES, name="audit_outcome", native_enum=False, create_constraint=True, length=16)
    )
    detail: Mapped[str | None] = mapped_column(String(300))
    result_bytes: Mapped[int] = mapped_column(Integer)
    duration_ms: Mapped[float] = mapped_column(Float)
    # A write's before/after values, idempotency key and confirmation outcome (JSON),
    # written in the write's own transaction.
    change: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_audit_events_time", "time"),
        Index("ix_audit_events_caller_time", "caller", "time"),
        Index("ix_audit_events_tool_time", "tool", "time"),
    )
