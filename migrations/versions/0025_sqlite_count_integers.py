"""SQLite: `created_at` and `sla_breach_at` kept as integers too, for `count_tickets`

`count_tickets` tallies each matching open ticket's age and breach by comparing its
`created_at` and `sla_breach_at` with moments, on every row it counts. SQLite stores
these timestamps as 26-character text: the comparisons cost about as much as the scan,
and the text makes `ix_tickets_counts` wide. Two integer columns, microseconds since
1970-01-01 UTC, hold the same moments (`created_at_us`, `sla_breach_at_us`); the index
carries them instead of the text, and the count compares them
(`tickets.sla_store.count`). Measurements: bench/ANALYSIS.md, issue 34.

Triggers keep them equal to the text in every writer of any version: after an insert,
and after an update that changes either timestamp. The conversion reads the text's
whole seconds with `strftime('%s', ...)` (given only the first 19 characters: SQLite's
date functions keep milliseconds and would round .999999 up) and its fraction as six
digits. Existing rows are converted here.

PostgreSQL stores `timestamptz` as an integer already: nothing changes there.

Revision ID: 0025_sqlite_count_integers
Revises: 0024_counts_heap_order
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0025_sqlite_count_integers"
down_revision = "0024_counts_heap_order"
branch_labels = None
depends_on = None


def microseconds(column: str) -> str:
    """SQL: the UTC text timestamp ``column`` (``YYYY-MM-DD HH:MM:SS[.ffffff]``, as
    ``UTCDateTime`` writes it) as microseconds since the epoch; null for null."""
    return (
        f"(CAST(strftime('%s', substr({column}, 1, 19)) AS INTEGER) * 1000000 "
        f"+ CAST(substr({column} || '000000', 21, 6) AS INTEGER))"
    )


def _set_both(row: str) -> str:
    return (
        f"created_at_us = {microseconds(row + '.created_at')}, "
        f"sla_breach_at_us = {microseconds(row + '.sla_breach_at')}"
    )


UPGRADE = [
    "ALTER TABLE tickets ADD COLUMN created_at_us INTEGER",
    "ALTER TABLE tickets ADD COLUMN sla_breach_at_us INTEGER",
    f"UPDATE tickets SET {_set_both('tickets')}",
    f"""CREATE TRIGGER tickets_times_ai AFTER INSERT ON tickets BEGIN
        UPDATE tickets SET {_set_both("NEW")} WHERE pk = NEW.pk;
    END""",
    f"""CREATE TRIGGER tickets_times_au AFTER UPDATE OF created_at, sla_breach_at ON tickets
    WHEN NEW.created_at IS NOT OLD.created_at OR NEW.sla_breach_at IS NOT OLD.sla_breach_at
    BEGIN
        UPDATE tickets SET {_set_both("NEW")} WHERE pk = NEW.pk;
    END""",
    "DROP INDEX ix_tickets_counts",
    "CREATE INDEX ix_tickets_counts ON tickets (status, queue, priority, owner, "
    "created_at_us, sla_covered, sla_breach_at_us)",
]
DOWNGRADE = [
    "DROP INDEX ix_tickets_counts",
    "CREATE INDEX ix_tickets_counts ON tickets (status, queue, priority, owner, "
    "created_at, sla_covered, sla_breach_at)",
    "DROP TRIGGER tickets_times_au",
    "DROP TRIGGER tickets_times_ai",
    # Plain ALTER TABLE DROP COLUMN (SQLite 3.35+), as 0018.
    "ALTER TABLE tickets DROP COLUMN sla_breach_at_us",
    "ALTER TABLE tickets DROP COLUMN created_at_us",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in DOWNGRADE:
            op.execute(statement)
