"""drop `search_postings`, revision 0008's postings keyed by the ticket's `updated_at`

Revision 0017 moved search to `ticket_search_postings` (keyed by `created_at`, which no
write changes) and kept the old table for replicas of older versions during a rolling
upgrade. No version since reads or writes it; it held as many rows as the new one (one
per token of every ticket), about half the search structures' size (issue 37's storage
bound). Upgrade every replica to a version at 0017 or later before this revision: an
older one still writes the table and would fail once it is gone.

Downgrade makes it again from the tickets' search columns, as 0008 did.

Revision ID: 0019_drop_old_postings
Revises: 0018_sla_stored
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_drop_old_postings"
down_revision = "0018_sla_stored"
branch_labels = None
depends_on = None

# 0008's statements (a revision does not import another).
_SQLITE_TOKENS = """SELECT j.value AS term, {weight} AS weight, t.updated_at, t.pk
    FROM tickets t, json_each('["' || replace(trim(t.{column}), ' ', '","') || '"]') j
    WHERE trim(t.{column}) <> ''"""
_POSTGRES_TOKENS = """SELECT s.term, {weight} AS weight, t.updated_at, t.pk
    FROM tickets t, unnest(string_to_array(btrim(t.{column}), ' ')) AS s(term)
    WHERE btrim(t.{column}) <> ''"""
_POST = """INSERT INTO search_postings (term, impact, updated_at, ticket_pk)
    SELECT term, sum(weight), updated_at, pk FROM ({subject} UNION ALL {body}) AS tokens
    GROUP BY term, updated_at, pk ORDER BY 1, 2, 3, 4"""


def upgrade() -> None:
    op.drop_table("search_postings")


def downgrade() -> None:
    op.create_table(
        "search_postings",
        sa.Column("term", sa.String(64), nullable=False),
        sa.Column("impact", sa.SmallInteger(), nullable=False, autoincrement=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ticket_pk", sa.Integer(), nullable=False, autoincrement=False),
        sa.PrimaryKeyConstraint("term", "impact", "updated_at", "ticket_pk"),
        sqlite_with_rowid=False,
    )
    tokens = _SQLITE_TOKENS if op.get_bind().dialect.name == "sqlite" else _POSTGRES_TOKENS
    op.execute(
        _POST.format(
            subject=tokens.format(weight=2, column="search_subject"),
            body=tokens.format(weight=1, column="search_body"),
        )
    )
