"""queues and requesters as tables; tickets reference them; authorship by assistants

- `queues` (name, display name, description, time zone, active): one row per queue the
  tickets name today (display name: the name capitalised, time zone UTC, active), and
  `tickets.queue` a foreign key to `queues.name`.
- `tickets.customer` a foreign key to `customers.name`: an organisation a ticket names
  without a `customers` row gets one (`CUS-<n>` after the highest numbered id, plan and
  region `unknown`, created when its first ticket was), so no ticket's value changes.
- `requesters` (a customer's contacts: name, e-mail, organisation) and
  `tickets.requester_id` (null for every existing ticket: they named the organisation
  only); `tickets.channel`, how a ticket opened since arrived (null before).
- `callers.kind` (`person`, the default, or `assistant`), and `by_assistant` on
  `comments` and `ticket_events`: whether the caller that wrote it was an assistant.

SQLite cannot add a foreign key to an existing column: the tickets table is copied
(Alembic's batch mode) and the full-text triggers of revision 0005, dropped with the old
table, are made again on the copy (the FTS5 index follows `tickets.pk`, which the copy
keeps, so it needs no rebuild).

Revision ID: 0012_queues_customers
Revises: 0011_cancelled_outcome
Create Date: 2026-12-02
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012_queues_customers"
down_revision = "0011_cancelled_outcome"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    """CREATE TRIGGER tickets_fts_ai AFTER INSERT ON tickets BEGIN
        INSERT INTO tickets_fts(rowid, search_subject, search_body)
        VALUES (new.pk, new.search_subject, new.search_body);
    END""",
    """CREATE TRIGGER tickets_fts_ad AFTER DELETE ON tickets BEGIN
        INSERT INTO tickets_fts(tickets_fts, rowid, search_subject, search_body)
        VALUES ('delete', old.pk, old.search_subject, old.search_body);
    END""",
    """CREATE TRIGGER tickets_fts_au AFTER UPDATE OF search_subject, search_body, pk ON tickets BEGIN
        INSERT INTO tickets_fts(tickets_fts, rowid, search_subject, search_body)
        VALUES ('delete', old.pk, old.search_subject, old.search_body);
        INSERT INTO tickets_fts(rowid, search_subject, search_body)
        VALUES (new.pk, new.search_subject, new.search_body);
    END""",
]
SQLITE_DROP_TRIGGERS = [
    "DROP TRIGGER IF EXISTS tickets_fts_au",
    "DROP TRIGGER IF EXISTS tickets_fts_ad",
    "DROP TRIGGER IF EXISTS tickets_fts_ai",
]
_NUMBERED = re.compile(r"^CUS-(\d+)$")


def display_name(name: str) -> str:
    """A queue's display name made from its key: ``customer_success`` -> ``Customer success``."""
    words = name.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else name


def _data(bind: sa.Connection) -> None:
    # created_at untyped: SQLite's values are passed as the text it stores (a ticket's
    # min(created_at) comes back as that text), PostgreSQL's as timestamps.
    now: Any = datetime.now(UTC)
    if bind.dialect.name == "sqlite":
        now = now.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    queues = sa.table(
        "queues",
        sa.column("name", sa.String),
        sa.column("display_name", sa.String),
        sa.column("description", sa.Text),
        sa.column("time_zone", sa.String),
        sa.column("active", sa.Boolean),
        sa.column("created_at"),
    )
    names = bind.execute(sa.text("SELECT DISTINCT queue FROM tickets ORDER BY queue")).scalars()
    rows = [
        {
            "name": q,
            "display_name": display_name(q),
            "description": "",
            "time_zone": "UTC",
            "active": True,
            "created_at": now,
        }
        for q in names
    ]
    if rows:
        op.bulk_insert(queues, rows)
    missing = bind.execute(
        sa.text(
            "SELECT t.customer, min(t.created_at) FROM tickets t "
            "WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE c.name = t.customer) "
            "GROUP BY t.customer ORDER BY t.customer"
        )
    ).all()
    if missing:
        ids = bind.execute(sa.text("SELECT id FROM customers")).scalars()
        numbers = [int(m.group(1)) for i in ids if (m := _NUMBERED.match(i))]
        first = max(numbers, default=999) + 1
        customers = sa.table(
            "customers",
            sa.column("id", sa.String),
            sa.column("name", sa.String),
            sa.column("plan", sa.String),
            sa.column("region", sa.String),
            sa.column("billing_reference", sa.String),
            sa.column("created_at"),
        )
        op.bulk_insert(
            customers,
            [
                {
                    "id": f"CUS-{first + n}",
                    "name": name,
                    "plan": "unknown",
                    "region": "unknown",
                    "billing_reference": "",
                    "created_at": created,
                }
                for n, (name, created) in enumerate(missing)
            ],
        )


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "queues",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("time_zone", sa.String(64), nullable=False, server_default="UTC"),
        sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "requesters",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column(
            "customer_id",
            sa.String(32),
            sa.ForeignKey("customers.id", name="fk_requesters_customer"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_requesters_id", "requesters", ["id"], unique=True)
    op.create_index("ix_requesters_email", "requesters", ["email"], unique=True)
    _data(bind)
    requester = sa.Column("requester_id", sa.String(32), nullable=True)
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_DROP_TRIGGERS:
            op.execute(statement)
        with op.batch_alter_table("tickets", recreate="always") as batch:
            batch.add_column(requester)
            batch.add_column(sa.Column("channel", sa.String(16), nullable=True))
            batch.create_foreign_key("fk_tickets_queue", "queues", ["queue"], ["name"])
            batch.create_foreign_key("fk_tickets_customer", "customers", ["customer"], ["name"])
            batch.create_foreign_key("fk_tickets_requester", "requesters", ["requester_id"], ["id"])
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)
    else:
        op.add_column("tickets", requester)
        op.add_column("tickets", sa.Column("channel", sa.String(16), nullable=True))
        op.create_foreign_key("fk_tickets_queue", "tickets", "queues", ["queue"], ["name"])
        op.create_foreign_key("fk_tickets_customer", "tickets", "customers", ["customer"], ["name"])
        op.create_foreign_key(
            "fk_tickets_requester", "tickets", "requesters", ["requester_id"], ["id"]
        )
    for table in ("comments", "ticket_events"):
        op.add_column(
            table,
            sa.Column("by_assistant", sa.Boolean(), nullable=False, server_default=sa.false()),
        )
    op.add_column(
        "callers", sa.Column("kind", sa.String(16), nullable=False, server_default="person")
    )


def downgrade() -> None:
    bind = op.get_bind()
    op.drop_column("callers", "kind")
    for table in ("ticket_events", "comments"):
        op.drop_column(table, "by_assistant")
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_DROP_TRIGGERS:
            op.execute(statement)
        with op.batch_alter_table("tickets", recreate="always") as batch:
            batch.drop_constraint("fk_tickets_requester", type_="foreignkey")
            batch.drop_constraint("fk_tickets_customer", type_="foreignkey")
            batch.drop_constraint("fk_tickets_queue", type_="foreignkey")
            batch.drop_column("requester_id")
            batch.drop_column("channel")
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)
    else:
        for name in ("fk_tickets_requester", "fk_tickets_customer", "fk_tickets_queue"):
            op.drop_constraint(name, "tickets", type_="foreignkey")
        op.drop_column("tickets", "requester_id")
        op.drop_column("tickets", "channel")
    # The customers rows made for tickets' names stay: they are data, and harmless.
    op.drop_index("ix_requesters_email", table_name="requesters")
    op.drop_index("ix_requesters_id", table_name="requesters")
    op.drop_table("requesters")
    op.drop_table("queues")
