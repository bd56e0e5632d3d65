"""governed writes: idempotency keys of writes, and the change a write made in its audit row

``write_requests`` keeps, per caller and idempotency key, the hash of the request and the
result it produced, so a retry returns the first result and writes nothing.
``callers.write_queues`` narrows where a caller with ``tickets:write`` may write (null:
wherever it may read); ``callers.confirm_writes`` replaces the deployment's list of
writes needing a person's confirmation for that caller (null: the deployment's).
``audit_events.change`` holds a write's before/after values, idempotency key and
confirmation outcome (JSON text), written in the same transaction as the write.

Revision ID: 0006_writes
Revises: 0005_search_analyzer
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_writes"
down_revision = "0005_search_analyzer"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit_events", sa.Column("change", sa.Text(), nullable=True))
    op.add_column("callers", sa.Column("write_queues", sa.Text(), nullable=True))
    op.add_column("callers", sa.Column("confirm_writes", sa.Text(), nullable=True))
    op.create_table(
        "write_requests",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("request_sha256", sa.String(64), nullable=False),
        sa.Column("ticket_id", sa.String(32), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_write_requests_caller_key", "write_requests", ["caller", "idempotency_key"], unique=True
    )


def downgrade() -> None:
    op.drop_table("write_requests")
    op.drop_column("callers", "confirm_writes")
    op.drop_column("callers", "write_queues")
    op.drop_column("audit_events", "change")
