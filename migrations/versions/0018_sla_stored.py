"""each ticket's SLA state stored: `tickets.sla_covered`, `sla_due_at`, `sla_breach_at`

Counting breaches and listing what is due derived every matching ticket's SLA state from
its history at read time, which bounded them to 5,000 tickets (issue 34). Between two
changes of what a state is derived from (status, queue, priority, a public agent reply,
the policy) a ticket's clocks run or stay paused as they are, so its next due time and
the moment it breaches are fixed at the last change. These columns hold them, written
in every such change's transaction (``ticket_server.tickets.sla_store.refresh``), and
indexed: "breached now" is ``sla_breach_at <= now``.

Existing tickets are derived here, in batches, by the same function under the stored
policy. Additive: replicas of older versions do not write the columns; tickets they
change are derived again by ``ticket-server sla recompute``, and counts say how many are
not derived yet (``sla_covered`` null) instead of counting them.

Revision ID: 0018_sla_stored
Revises: 0017_search_bounded
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_sla_stored"
down_revision = "0017_search_bounded"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tickets", sa.Column("sla_covered", sa.Boolean(), nullable=True))
    op.add_column("tickets", sa.Column("sla_due_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("tickets", sa.Column("sla_breach_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_tickets_sla_due_at", "tickets", ["sla_due_at"])
    op.create_index("ix_tickets_sla_breach_at", "tickets", ["sla_breach_at"])
    # Every column count_tickets groups, filters or sums by: its GROUP BY reads the index
    # alone instead of every open ticket's row (226 -> 23 ms at 100,000 tickets, SQLite).
    op.create_index(
        "ix_tickets_counts",
        "tickets",
        ["status", "queue", "priority", "owner", "created_at", "sla_covered", "sla_breach_at"],
    )
    from ticket_server.tickets.sla import policy_from_rows
    from ticket_server.tickets.sla_store import refresh_all

    # The policy as this revision's tables hold it (later revisions add columns that
    # today's models would select).
    bind = op.get_bind()
    calendars = sa.table(
        "sla_calendars",
        *(sa.column(c) for c in ("queue", "time_zone", "hours", "holidays", "pause_statuses")),
    )
    targets = sa.table(
        "sla_targets",
        *(
            sa.column(c)
            for c in ("queue", "priority", "first_response_minutes", "resolution_minutes")
        ),
    )
    policy = policy_from_rows(
        [dict(r) for r in bind.execute(sa.select(calendars)).mappings()],
        [dict(r) for r in bind.execute(sa.select(targets)).mappings()],
    )
    refresh_all(bind, policy)


def downgrade() -> None:
    op.drop_index("ix_tickets_counts", table_name="tickets")
    op.drop_index("ix_tickets_sla_breach_at", table_name="tickets")
    op.drop_index("ix_tickets_sla_due_at", table_name="tickets")
    # Plain ALTER TABLE DROP COLUMN (SQLite 3.35+), as 0004: a batch copy of the table
    # would drop its full-text triggers.
    op.drop_column("tickets", "sla_breach_at")
    op.drop_column("tickets", "sla_due_at")
    op.drop_column("tickets", "sla_covered")
