"""`sla_calendars.holiday_calendar`: a queue's public holidays from a calendar library

A queue's holidays were only a list of dates the operator kept up to date by hand. This
column names a country (and subdivision) whose public holidays the `holidays` library
gives for every year (`DE-BY`, `US`); null, the default for every existing row, keeps the
list alone. Additive: replicas of older versions keep working during a rolling upgrade.

Revision ID: 0021_sla_holiday_calendar
Revises: 0020_tickets_scope_index
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_sla_holiday_calendar"
down_revision = "0020_tickets_scope_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sla_calendars") as batch:
        batch.add_column(sa.Column("holiday_calendar", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sla_calendars") as batch:
        batch.drop_column("holiday_calendar")
