"""PostgreSQL: `ix_tickets_counts` in heap order, `(status, pk) INCLUDE (...)`

`count_tickets` reads every matching ticket from `ix_tickets_counts` alone (an
index-only scan). On PostgreSQL each entry's visibility is checked in the visibility
map, one map page per 32,672 heap pages, and the scan re-reads a map page whenever two
consecutive entries fall under different ones. Ordered `(status, queue, priority, ...)`,
consecutive entries of a group point all over the heap: at 1M tickets (203,326 open)
the count touched about 186,000 buffers and took 77-90 ms alone. Ordered `(status, pk)`,
the entries of a status follow the order rows were written in, which is their order in
the heap for a table that is mostly appended to: 4,870 buffers, 35-37 ms (the other
columns carried with `INCLUDE`; the few groups are hashed instead of read in order).
bench/ANALYSIS.md, issue 34, has the measurements.

SQLite keeps the index as revision 0018 made it: a table b-tree has no visibility map,
and its GROUP BY is served in the index's order. The index is managed here by hand, no
longer declared on the model, since its columns differ by engine.

Creating the index takes a lock that holds back writes to `tickets` while it is built
(about 2 s at 1M tickets).

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

COLUMNS = "queue, priority, owner, created_at, sla_covered, sla_breach_at"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX ix_tickets_counts")
    op.execute(f"CREATE INDEX ix_tickets_counts ON tickets (status, pk) INCLUDE ({COLUMNS})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX ix_tickets_counts")
    op.execute(f"CREATE INDEX ix_tickets_counts ON tickets (status, {COLUMNS})")
