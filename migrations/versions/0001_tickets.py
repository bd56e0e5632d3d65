"""tickets table with the indexes the tools need

Revision ID: 0001_tickets
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_tickets"
down_revision = None
branch_labels = None
depends_on = None

STATUSES = ("new", "open", "in_progress", "waiting_on_customer", "resolved", "closed")
PRIORITIES = ("low", "normal", "high", "urgent")


def upgrade() -> None:
    op.create_table(
        "tickets",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(300), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                *STATUSES,
                name="ticket_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column(
            "priority",
            sa.Enum(
                *PRIORITIES,
                name="ticket_priority",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("queue", sa.String(64), nullable=False),
        sa.Column("customer", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_tickets_id", "tickets", ["id"], unique=True)
    op.create_index("ix_tickets_updated_at", "tickets", ["updated_at", "pk"])
    op.create_index("ix_tickets_queue_updated_at", "tickets", ["queue", "updated_at"])
    op.create_index("ix_tickets_status", "tickets", ["status"])
    op.create_index("ix_tickets_owner", "tickets", ["owner"])


def downgrade() -> None:
    op.drop_table("tickets")
