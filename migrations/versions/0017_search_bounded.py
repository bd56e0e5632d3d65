"""search postings keyed by the ticket's `created_at`, not its `updated_at`

A write that changes no ticket text (status, priority, owner, queue, a note or reply)
moved every search posting of its ticket (one row per token, about 37) to the new
`updated_at`. The postings now carry the ticket's `created_at`, which no write changes,
and a relevance search breaks ties of rank by `created_at` (ticket_server.tickets.search,
`recency`); such a write then writes no search row (issue 37). The column is renamed and
set from each ticket's row.

Revision ID: 0017_search_bounded
Revises: 0011_cancelled_outcome
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0017_search_bounded"
down_revision = "0011_cancelled_outcome"
branch_labels = None
depends_on = None

_SET = {
    "sqlite": """UPDATE search_postings SET {column} = (SELECT t.{source} FROM tickets t
        WHERE t.pk = search_postings.ticket_pk)""",
    "postgresql": """UPDATE search_postings p SET {column} = t.{source} FROM tickets t
        WHERE t.pk = p.ticket_pk AND p.{column} <> t.{source}""",
}


def _set(column: str, source: str) -> None:
    op.execute(_SET[op.get_bind().dialect.name].format(column=column, source=source))


def upgrade() -> None:
    op.execute("ALTER TABLE search_postings RENAME COLUMN updated_at TO created_at")
    _set("created_at", "created_at")


def downgrade() -> None:
    _set("created_at", "updated_at")
    op.execute("ALTER TABLE search_postings RENAME COLUMN created_at TO updated_at")
