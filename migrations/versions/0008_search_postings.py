"""search postings: each ticket's search tokens in the order a relevance search reads them

`search_postings` holds one row per (token, ticket): the token, its impact in the ticket
(2 when the subject holds it + 1 when the body does), the ticket's `updated_at` and key.
Its primary key is that order, so the holders of a word are read best first and a
search of frequent words stops after the first page instead of scoring every holder
(ticket_server.tickets.search). Existing tickets are posted here from their search
columns (`search_subject`, `search_body`: tokens separated by single spaces, no quotes),
in SQL.

Revision ID: 0008_search_postings
Revises: 0007_comment_search
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_search_postings"
down_revision = "0007_comment_search"
branch_labels = None
depends_on = None

# Each column's tokens as rows: SQLite through json_each over the tokens made a JSON
# array (they hold no quote or backslash), PostgreSQL through unnest.
_SQLITE_TOKENS = """SELECT j.value AS term, {weight} AS weight, t.updated_at, t.pk
    FROM tickets t, json_each('["' || replace(trim(t.{column}), ' ', '","') || '"]') j
    WHERE trim(t.{column}) <> ''"""
_POSTGRES_TOKENS = """SELECT s.term, {weight} AS weight, t.updated_at, t.pk
    FROM tickets t, unnest(string_to_array(btrim(t.{column}), ' ')) AS s(term)
    WHERE btrim(t.{column}) <> ''"""
_POST = """INSERT INTO search_postings (term, impact, updated_at, ticket_pk)
    SELECT term, sum(weight), updated_at, pk FROM ({subject} UNION ALL {body}) AS tokens
    GROUP BY term, updated_at, pk ORDER BY 1, 2, 3, 4"""


def post_existing_tickets() -> None:
    dialect = op.get_bind().dialect.name
    tokens = _SQLITE_TOKENS if dialect == "sqlite" else _POSTGRES_TOKENS
    op.execute(
        _POST.format(
            subject=tokens.format(weight=2, column="search_subject"),
            body=tokens.format(weight=1, column="search_body"),
        )
    )


def upgrade() -> None:
    op.create_table(
        "search_postings",
        sa.Column("term", sa.String(64), nullable=False),
        sa.Column("impact", sa.SmallInteger(), nullable=False, autoincrement=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ticket_pk", sa.Integer(), nullable=False, autoincrement=False),
        sa.PrimaryKeyConstraint("term", "impact", "updated_at", "ticket_pk"),
        sqlite_with_rowid=False,
    )
    post_existing_tickets()


def downgrade() -> None:
    op.drop_table("search_postings")
