"""`sla_plan_targets`: SLA targets per customer plan

A queue's targets were per priority only; a support contract usually promises more to
some plans (an Enterprise customer's urgent ticket answered in 15 minutes, a Starter's
in 4 hours). Rows here replace a queue's `sla_targets` row for the tickets of customers
on `plan` (`customers.plan`, compared case-insensitively). Additive: no rows, no change;
replicas of older versions keep working during a rolling upgrade (they judge every
ticket by the plain targets until `ticket-server sla recompute` runs after it).

Revision ID: 0022_sla_plan_targets
Revises: 0021_sla_holiday_calendar
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_sla_plan_targets"
down_revision = "0021_sla_holiday_calendar"
branch_labels = None
depends_on = None

PRIORITIES = ("low", "normal", "high", "urgent")


def upgrade() -> None:
    op.create_table(
        "sla_plan_targets",
        sa.Column("queue", sa.String(64), primary_key=True),
        sa.Column("plan", sa.String(32), primary_key=True),
        sa.Column(
            "priority",
            sa.Enum(
                *PRIORITIES,
                name="sla_plan_target_priority",
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
    op.drop_table("sla_plan_targets")
