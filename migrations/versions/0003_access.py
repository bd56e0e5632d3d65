"""callers (who may call the tools) and audit_events (who called what)

Plain tables and indexes only, so the same revision runs on SQLite and PostgreSQL.

Revision ID: 0003_access
Revises: 0002_search
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_access"
down_revision = "0002_search"
branch_labels = None
depends_on = None

OUTCOMES = ("ok", "tool_error", "denied", "rate_limited")


def upgrade() -> None:
    op.create_table(
        "callers",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("queues", sa.Text(), nullable=True),
        sa.Column("tool_rate_limit", sa.String(64), nullable=True),
        sa.Column("http_rate_limit", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_callers_name", "callers", ["name"], unique=True)
    op.create_index("ix_callers_token_sha256", "callers", ["token_sha256"], unique=True)
    op.create_table(
        "audit_events",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("caller", sa.String(64), nullable=True),
        sa.Column("transport", sa.String(32), nullable=False),
        sa.Column("protocol_version", sa.String(32), nullable=True),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column(
            "outcome",
            sa.Enum(
                *OUTCOMES,
                name="audit_outcome",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("detail", sa.String(300), nullable=True),
        sa.Column("result_bytes", sa.Integer(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
    )
    op.create_index("ix_audit_events_time", "audit_events", ["time"])
    op.create_index("ix_audit_events_caller_time", "audit_events", ["caller", "time"])
    op.create_index("ix_audit_events_tool_time", "audit_events", ["tool", "time"])


def downgrade() -> None:
    op.drop_table("audit_events")
    op.drop_table("callers")
