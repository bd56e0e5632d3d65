"""search postings keyed by the ticket's `created_at`: `ticket_search_postings`

A write that changes no ticket text (status, priority, owner, queue, a note or reply)
moved every search posting of its ticket (one row per token, about 37) to the ticket's
new `updated_at`. `ticket_search_postings` holds the same rows keyed by the ticket's
`created_at`, which no write changes, and a relevance search breaks ties of rank by
`created_at` (ticket_server.tickets.search, `recency`); such a write then writes no
search row (issue 37). Existing tickets are posted from their search columns, in SQL,
as 0008 did.

Additive: `search_postings` (0008) stays for replicas of older versions, which keep
writing it during a rolling upgrade; this version neither reads nor writes it, and a
later revision drops it. Tickets such replicas insert reach the new table through
`ticket-server db reindex`.

Revision ID: 0017_search_bounded
Revises: 0016_links
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_search_bounded"
down_revision = "0016_links"
branch_labels = None
depends_on = None

# Each column's tokens as rows: SQLite through json_each over the tokens made a JSON
# array (they hold no quote or backslash), PostgreSQL through unnest (as in 0008).
_SQLITE_TOKENS = """SELECT j.value AS term, {weight} AS weight, t.created_at, t.pk
    FROM tickets t, json_each('["' || replace(trim(t.{column}), ' ', '","') || '"]') j
    WHERE trim(t.{column}) <> ''"""
_POSTGRES_TOKENS = """SELECT s.term, {weight} AS weight, t.created_at, t.pk
    FROM tickets t, unnest(string_to_array(btrim(t.{column}), ' ')) AS s(term)
    WHERE btrim(t.{column}) <> ''"""
_POST = """INSERT INTO ticket_search_postings (term, impact, created_at, ticket_pk)
    SELECT term, sum(weight), created_at, pk FROM ({subject} UNION ALL {body}) AS tokens
    GROUP BY term, created_at, pk ORDER BY 1, 2, 3, 4"""


def upgrade() -> None:
    op.create_table(
        "ticket_search_postings",
        sa.Column("term", sa.String(64), nullable=False),
        sa.Column("impact", sa.SmallInteger(), nullable=False, autoincrement=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ticket_pk", sa.Integer(), nullable=False, autoincrement=False),
        sa.PrimaryKeyConstraint("term", "impact", "created_at", "ticket_pk"),
        sqlite_with_rowid=False,
    )
    tokens = _SQLITE_TOKENS if op.get_bind().dialect.name == "sqlite" else _POSTGRES_TOKENS
    op.execute(
        _POST.format(
            subject=tokens.format(weight=2, column="search_subject"),
            body=tokens.format(weight=1, column="search_body"),
        )
    )


def downgrade() -> None:
    op.drop_table("ticket_search_postings")
