"""SLA policies: per queue (by name) a calendar (time zone, weekly hours, holidays) and
the statuses that pause the clock; per queue and priority the first-response and
resolution targets in business minutes. Loaded by `ticket-server sla load FILE`; the
SLA state of a ticket is derived from these and its history at read time.

Revision ID: 0014_sla
Revises: 0013_tags_fields
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_sla"
down_revision = "0013_tags_fields"
branch_labels = None
depends_on = None

PRIORITIES = ("low", "normal", "high", "urgent")


def upgrade() -> None:
    op.create_table(
        "sla_calendars",
        sa.Column("queue", sa.String(64), primary_key=True),
        sa.Column("time_zone", sa.String(64), nullable=False),
        sa.Column("hours", sa.Text(), nullable=False),
        sa.Column("holidays", sa.Text(), nullable=False),
        sa.Column("pause_statuses", sa.Text(), nullable=False),
    )
    op.create_table(
        "sla_targets",
        sa.Column("queue", sa.String(64), primary_key=True),
        sa.Column(
            "priority",
            sa.Enum(
                *PRIORITIES,
                name="sla_target_priority",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            primary_key=True,
        ),
        sa.Column("first_response_minutes", sa.Integer(), nullable=True),
        sa.Column("resolution_minutes", sa.Integer(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("sla_targets")
    op.drop_table("sla_calendars")
