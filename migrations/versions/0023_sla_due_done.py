"""resolved and closed tickets have no stored `sla_due_at`

Revision 0018 stored each ticket's next SLA due time. A resolved or closed ticket whose
first response had breached unmet kept that breach time as its due time, so
`search_tickets_v2`'s `sort: "due"` listed long-closed tickets first and `due_before`
found them: nothing is due on a ticket that is done. From this version the write path
stores no due time for them (`tickets/sla_store.stored_columns`); this revision clears
the ones already stored. `sla_breach_at` is kept: the breach happened.

Data only: replicas of older versions keep working during a rolling upgrade (one that
changes a done ticket may store its due time again, as before, until it is upgraded).
Downgrade leaves the column as it is (an older version reads a null due time as "none").

Revision ID: 0023_sla_due_done
Revises: 0022_sla_plan_targets
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0023_sla_due_done"
down_revision = "0022_sla_plan_targets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE tickets SET sla_due_at = NULL "
        "WHERE status IN ('resolved', 'closed') AND sla_due_at IS NOT NULL"
    )


def downgrade() -> None:
    pass
