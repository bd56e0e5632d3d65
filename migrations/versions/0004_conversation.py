"""customers, comments and ticket_events (the conversation and history of a ticket);
tickets.version for optimistic concurrency; tickets by customer

Plain tables and indexes only, so the same revision runs on SQLite and PostgreSQL.
Adding a NOT NULL column with a constant default is instant on both engines, whatever
the number of tickets.

Revision ID: 0004_conversation
Revises: 0003_access
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_conversation"
down_revision = "0003_access"
branch_labels = None
depends_on = None

AUTHOR_TYPES = ("customer", "agent", "system")
VISIBILITIES = ("public", "internal")
EVENT_FIELDS = ("status", "priority", "owner", "queue")


def _enum(values: tuple[str, ...], name: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=32)


def upgrade() -> None:
    op.add_column("tickets", sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
    op.create_index("ix_tickets_customer_updated_at", "tickets", ["customer", "updated_at"])
    op.create_table(
        "customers",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("plan", sa.String(32), nullable=False),
        sa.Column("region", sa.String(32), nullable=False),
        sa.Column("billing_reference", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_customers_id", "customers", ["id"], unique=True)
    op.create_index("ix_customers_name", "customers", ["name"], unique=True)
    op.create_table(
        "comments",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "ticket_id",
            sa.String(32),
            sa.ForeignKey("tickets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("author_type", _enum(AUTHOR_TYPES, "author_type"), nullable=False),
        sa.Column("visibility", _enum(VISIBILITIES, "comment_visibility"), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_comments_ticket_created_at", "comments", ["ticket_id", "created_at", "pk"])
    op.create_table(
        "ticket_events",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "ticket_id",
            sa.String(32),
            sa.ForeignKey("tickets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("field", _enum(EVENT_FIELDS, "event_field"), nullable=False),
        sa.Column("old_value", sa.String(64), nullable=True),
        sa.Column("new_value", sa.String(64), nullable=True),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("actor_type", _enum(AUTHOR_TYPES, "author_type"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_ticket_events_ticket_created_at", "ticket_events", ["ticket_id", "created_at", "pk"]
    )


def downgrade() -> None:
    op.drop_table("ticket_events")
    op.drop_table("comments")
    op.drop_table("customers")
    op.drop_index("ix_tickets_customer_updated_at", table_name="tickets")
    # A plain ALTER TABLE ... DROP COLUMN on both engines (SQLite 3.35+): a batch copy
    # of the table would drop the full-text triggers with it.
    op.drop_column("tickets", "version")
