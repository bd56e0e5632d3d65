"""PostgreSQL: `ix_tickets_counts` as `(status, queue, pk) INCLUDE (...)`, in heap order

`count_tickets` reads every matching ticket from `ix_tickets_counts` alone (an
index-only scan). On PostgreSQL each entry's visibility is checked in the visibility
map, one map page per 32,672 heap pages, and the scan re-reads a map page whenever two
consecutive entries fall under different ones. Ordered `(status, queue, priority, owner,
created_at, ...)`, consecutive entries of a group point all over the heap, and the count
touched about one map page per ticket. Ordered `(status, queue, pk)`, a group's entries
follow the order its rows were written in, which is their order in the heap for a table
that is mostly appended to; the other columns are carried with `INCLUDE`, and a count
filtered by queue still seeks to it. Measurements: bench/ANALYSIS.md, issue 34.

SQLite keeps the index as revision 0018 made it (a table b-tree has no visibility map,
and its GROUP BY is served in the index's order; revision 0025 changes it there). The
index is managed by hand, no longer declared on the model, since its columns differ by
engine.

The new index is built under another name first (writes to `tickets` wait while it is
built, reads do not), then swapped in: reads wait only for the swap.

Revision ID: 0024_counts_heap_order
Revises: 0023_sla_due_done
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0024_counts_heap_order"
down_revision = "0023_sla_due_done"
branch_labels = None
depends_on = None

HEAP_ORDER = "(status, queue, pk) INCLUDE (priority, owner, created_at, sla_covered, sla_breach_at)"
KEY_ORDER = "(status, queue, priority, owner, created_at, sla_covered, sla_breach_at)"


def _swap(columns: str) -> None:
    op.execute(f"CREATE INDEX ix_tickets_counts_new ON tickets {columns}")
    op.execute("DROP INDEX ix_tickets_counts")
    op.execute("ALTER INDEX ix_tickets_counts_new RENAME TO ix_tickets_counts")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _swap(HEAP_ORDER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _swap(KEY_ORDER)
