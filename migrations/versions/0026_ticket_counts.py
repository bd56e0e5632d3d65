"""Ticket tallies per group for `count_tickets`, kept by triggers

`count_tickets` read every matching ticket's index entry to count it: at 1M tickets,
200,000 open ones, about 40 ms of the database's time before any tally (issue 34's
target is 50 ms for the whole call; bench/ANALYSIS.md). Most of a ticket's numbers do
not move with the clock: its group (status, queue, priority, owner), whether its SLA
columns are derived, whether a target covers it, whether it has a breach moment. These
are now kept per group, in `ticket_counts` (folded) plus `ticket_count_deltas` (each
change, appended by triggers in the writer's transaction: an insert takes no lock
another writer waits on). What moves with the clock is read from two indexes over the
tickets it concerns: the age buckets from tickets younger than the oldest bound (30
days, `ix_tickets_created_at`), the breach count from tickets whose breach moment is
still ahead (`ix_tickets_sla_breach_at`, widened here to carry the group's columns).

Triggers rather than application code: every writer of any version keeps the tallies
(as revision 0025's integer copies). An update fires them only when a counted column
changes. The tallies of existing tickets are computed here, with writes to `tickets`
held off until the triggers are in place (PostgreSQL: a table lock), so that none is
missed.

Revision ID: 0026_ticket_counts
Revises: 0025_sqlite_count_integers
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_ticket_counts"
down_revision = "0025_sqlite_count_integers"
branch_labels = None
depends_on = None

GROUP = ("status", "queue", "priority", "owner")
TALLIES = ("tickets", "covered", "without_sla", "breaching")
COLUMNS = ", ".join((*GROUP, *TALLIES))
COUNTED = ("status", "queue", "priority", "owner", "sla_covered", "sla_breach_at")


def _columns(keyed: bool) -> list[sa.Column[int] | sa.Column[str]]:
    return [
        sa.Column("status", sa.String(32), nullable=False, primary_key=keyed),
        sa.Column("queue", sa.String(64), nullable=False, primary_key=keyed),
        sa.Column("priority", sa.String(32), nullable=False, primary_key=keyed),
        sa.Column("owner", sa.String(64), nullable=False, primary_key=keyed),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in TALLIES),
    ]


def _row(row: str, sign: str, cast: str) -> str:
    """SQL: a delta row's values for ticket ``row`` (NEW or OLD), each tally ``sign`` 1."""
    return (
        f"{row}.status, {row}.queue, {row}.priority, coalesce({row}.owner, ''), {sign}1, "
        f"{sign}({row}.sla_covered IS NOT NULL){cast}, {sign}({row}.sla_covered IS FALSE){cast}, "
        f"{sign}({row}.sla_breach_at IS NOT NULL){cast}"
    )


def _changed(distinct: str) -> str:
    """SQL: whether an update changed what the tallies count of a ticket."""
    return " OR ".join(
        [f"OLD.{c} {distinct} NEW.{c}" for c in COUNTED[:-1]]
        + [f"(OLD.sla_breach_at IS NULL) {distinct} (NEW.sla_breach_at IS NULL)"]
    )


INSERT = f"INSERT INTO ticket_count_deltas ({COLUMNS}) VALUES"

SQLITE = [
    f"CREATE TRIGGER tickets_counts_ai AFTER INSERT ON tickets BEGIN "
    f"{INSERT} ({_row('NEW', '', '')}); END",
    f"CREATE TRIGGER tickets_counts_ad AFTER DELETE ON tickets BEGIN "
    f"{INSERT} ({_row('OLD', '-', '')}); END",
    f"CREATE TRIGGER tickets_counts_au AFTER UPDATE OF {', '.join(COUNTED)} ON tickets "
    f"WHEN {_changed('IS NOT')} BEGIN "
    f"{INSERT} ({_row('OLD', '-', '')}), ({_row('NEW', '', '')}); END",
]
POSTGRESQL = [
    f"""CREATE FUNCTION tickets_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN {INSERT} ({_row("OLD", "-", "::int")}); END IF;
        IF TG_OP <> 'DELETE' THEN {INSERT} ({_row("NEW", "", "::int")}); END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER tickets_counts_aid AFTER INSERT OR DELETE ON tickets "
    "FOR EACH ROW EXECUTE FUNCTION tickets_counts_follow()",
    f"CREATE TRIGGER tickets_counts_au AFTER UPDATE OF {', '.join(COUNTED)} ON tickets "
    f"FOR EACH ROW WHEN ({_changed('IS DISTINCT FROM')}) "
    "EXECUTE FUNCTION tickets_counts_follow()",
]


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if not sqlite:
        # Old replicas may write while this runs: a ticket written between the count below
        # and the triggers' creation would be in neither. Writes wait until the revision
        # commits (SQLite: its write transaction holds the file's write lock already).
        op.execute("LOCK TABLE tickets IN SHARE ROW EXCLUSIVE MODE")
    op.create_table("ticket_counts", *_columns(keyed=True))
    op.create_table(
        "ticket_count_deltas",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        *_columns(keyed=False),
    )
    op.create_index("ix_ticket_count_deltas_status", "ticket_count_deltas", ["status"])
    cast = "" if sqlite else "::int"
    op.execute(
        f"INSERT INTO ticket_counts ({COLUMNS}) SELECT status, queue, priority, "
        f"coalesce(owner, ''), count(*), count(sla_covered), "
        f"sum((sla_covered IS FALSE){cast}), count(sla_breach_at) "
        "FROM tickets GROUP BY status, queue, priority, coalesce(owner, '')"
    )
    for statement in SQLITE if sqlite else POSTGRESQL:
        op.execute(statement)
    op.drop_index("ix_tickets_sla_breach_at", table_name="tickets")
    op.create_index(
        "ix_tickets_sla_breach_at",
        "tickets",
        ["sla_breach_at", "status", "queue", "priority", "owner"],
    )
    op.create_index(
        "ix_tickets_created_at", "tickets", ["created_at", "status", "queue", "priority", "owner"]
    )


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.drop_index("ix_tickets_created_at", table_name="tickets")
    op.drop_index("ix_tickets_sla_breach_at", table_name="tickets")
    op.create_index("ix_tickets_sla_breach_at", "tickets", ["sla_breach_at"])
    if sqlite:
        for name in ("tickets_counts_au", "tickets_counts_ad", "tickets_counts_ai"):
            op.execute(f"DROP TRIGGER {name}")
    else:
        op.execute("DROP TRIGGER tickets_counts_au ON tickets")
        op.execute("DROP TRIGGER tickets_counts_aid ON tickets")
        op.execute("DROP FUNCTION tickets_counts_follow()")
    op.drop_table("ticket_count_deltas")
    op.drop_table("ticket_counts")
