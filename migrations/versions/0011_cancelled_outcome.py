"""audit outcome `cancelled`: a tools/call its client cancelled (or left) while it ran

`audit_events.outcome` is a non-native enum with a named CHECK constraint
(`audit_outcome`); changing the column's type makes the constraint again with the new
value (Alembic drops the old one). On SQLite the table is copied (Alembic's batch mode),
as SQLite cannot alter a constraint.

Revision ID: 0011_cancelled_outcome
Revises: 0010_caller_toolsets
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_cancelled_outcome"
down_revision = "0010_caller_toolsets"
branch_labels = None
depends_on = None

BEFORE = ("ok", "tool_error", "denied", "rate_limited")
AFTER = (*BEFORE, "cancelled")


def _outcomes(values: tuple[str, ...]) -> sa.Enum:
    return sa.Enum(
        *values, name="audit_outcome", native_enum=False, create_constraint=True, length=16
    )


def upgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.alter_column(
            "outcome", existing_type=_outcomes(BEFORE), type_=_outcomes(AFTER), nullable=False
        )


def downgrade() -> None:
    op.execute("UPDATE audit_events SET outcome = 'tool_error' WHERE outcome = 'cancelled'")
    with op.batch_alter_table("audit_events") as batch:
        batch.alter_column(
            "outcome", existing_type=_outcomes(AFTER), type_=_outcomes(BEFORE), nullable=False
        )
