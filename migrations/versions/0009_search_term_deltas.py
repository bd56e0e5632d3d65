"""search term deltas: writes append their changes to the word counts instead of
updating one shared row per word

`search_term_deltas` holds, per write, how many tickets and comments it added (or took)
for each search token. A word's counts are its `search_terms` row plus its rows here;
the server folds the rows into `search_terms` every few seconds, outside any write's
transaction, so writers to different tickets never wait on a word's row lock (case
C49). Nothing is moved: the table starts empty.

Revision ID: 0009_search_term_deltas
Revises: 0008_search_postings
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_search_term_deltas"
down_revision = "0008_search_postings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "search_term_deltas",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("term", sa.String(64), nullable=False),
        sa.Column("tickets", sa.Integer(), nullable=False),
        sa.Column("comments", sa.Integer(), nullable=False),
    )
    op.create_index("ix_search_term_deltas_term", "search_term_deltas", ["term"])


def downgrade() -> None:
    # Fold what is pending into search_terms first, so the counts stay whole.
    op.execute(
        "INSERT INTO search_terms (term, tickets, comments) "
        "SELECT term, sum(tickets), sum(comments) FROM search_term_deltas WHERE true "
        "GROUP BY term ON CONFLICT (term) DO UPDATE SET "
        "tickets = search_terms.tickets + excluded.tickets, "
        "comments = search_terms.comments + excluded.comments"
    )
    op.drop_index("ix_search_term_deltas_term", table_name="search_term_deltas")
    op.drop_table("search_term_deltas")
