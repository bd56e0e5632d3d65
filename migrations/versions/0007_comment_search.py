"""comment search: comment bodies analyzed and indexed like ticket text

`comments.search_body` holds a comment body as the search analyzer's tokens
(ticket_server.tickets.analyzer, written by the repository with the comment), indexed
without a parser of the engine's own, as tickets are since 0005:
SQLite: FTS5 external-content table `comments_fts` (unicode61, `tokenchars '_'`), kept in
step by triggers.
PostgreSQL: `comments.search_vector`, the column cast to tsvector (generated, GIN-indexed).
`search_terms.comments` counts the comments holding each token (the weight of a query
word when a search looks at the conversation too); its empty-term row counts the comments.
Existing comments are analyzed here (data migration).

Revision ID: 0007_comment_search
Revises: 0006_writes
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from alembic import op

revision = "0007_comment_search"
down_revision = "0006_writes"
branch_labels = None
depends_on = None

BATCH = 2000

SQLITE_UP = [
    """CREATE VIRTUAL TABLE comments_fts USING fts5(
        search_body, content='comments', content_rowid='pk',
        tokenize="unicode61 remove_diacritics 0 tokenchars '_'")""",
    """CREATE TRIGGER comments_fts_ai AFTER INSERT ON comments BEGIN
        INSERT INTO comments_fts(rowid, search_body) VALUES (new.pk, new.search_body);
    END""",
    """CREATE TRIGGER comments_fts_ad AFTER DELETE ON comments BEGIN
        INSERT INTO comments_fts(comments_fts, rowid, search_body) VALUES ('delete', old.pk, old.search_body);
    END""",
    """CREATE TRIGGER comments_fts_au AFTER UPDATE OF search_body, pk ON comments BEGIN
        INSERT INTO comments_fts(comments_fts, rowid, search_body) VALUES ('delete', old.pk, old.search_body);
        INSERT INTO comments_fts(rowid, search_body) VALUES (new.pk, new.search_body);
    END""",
    "INSERT INTO comments_fts(comments_fts) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS comments_fts_au",
    "DROP TRIGGER IF EXISTS comments_fts_ad",
    "DROP TRIGGER IF EXISTS comments_fts_ai",
    "DROP TABLE IF EXISTS comments_fts",
]
POSTGRES_UP = [
    "ALTER TABLE comments ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (CAST(search_body AS tsvector)) STORED",
    "CREATE INDEX ix_comments_search_vector ON comments USING gin (search_vector)",
]
POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS ix_comments_search_vector",
    "ALTER TABLE comments DROP COLUMN IF EXISTS search_vector",
]


def _analyze_existing_comments() -> None:
    """Fill comments.search_body and search_terms.comments for the comments already stored."""
    from ticket_server.tickets.analyzer import index_tokens, search_text
    from ticket_server.tickets.search import TOTAL

    conn = op.get_bind()
    comments = sa.table(
        "comments",
        sa.column("pk", sa.Integer),
        sa.column("body", sa.Text),
        sa.column("search_body", sa.Text),
    )
    terms = sa.table(
        "search_terms",
        sa.column("term", sa.String),
        sa.column("tickets", sa.Integer),
        sa.column("comments", sa.Integer),
    )
    update = (
        comments.update()
        .where(comments.c.pk == sa.bindparam("key"))
        .values(search_body=sa.bindparam("b"))
    )
    counts: Counter[str] = Counter()
    last = 0
    while True:
        rows = conn.execute(
            sa.select(comments.c.pk, comments.c.body)
            .where(comments.c.pk > last)
            .order_by(comments.c.pk)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        params = []
        for pk, body in rows:
            tokens = index_tokens(body)
            counts.update(tokens)
            params.append({"key": pk, "b": search_text(tokens)})
        counts[TOTAL] += len(rows)
        conn.execute(update, params)
        last = rows[-1].pk
    if not counts:
        return
    known = set(conn.execute(sa.select(terms.c.term)).scalars())
    conn.execute(
        terms.update().where(terms.c.term == sa.bindparam("t")).values(comments=sa.bindparam("n")),
        [{"t": t, "n": n} for t, n in sorted(counts.items()) if t in known],
    )
    new = [
        {"term": t, "tickets": 0, "comments": n}
        for t, n in sorted(counts.items())
        if t not in known
    ]
    if new:
        conn.execute(terms.insert(), new)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        raise NotImplementedError(f"full-text search is not implemented for {dialect}")
    op.add_column(
        "comments", sa.Column("search_body", sa.Text(), server_default=" ", nullable=False)
    )
    op.add_column(
        "search_terms", sa.Column("comments", sa.Integer(), server_default="0", nullable=False)
    )
    _analyze_existing_comments()
    for statement in SQLITE_UP if dialect == "sqlite" else POSTGRES_UP:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in SQLITE_DOWN if dialect == "sqlite" else POSTGRES_DOWN:
        op.execute(statement)
    op.execute("DELETE FROM search_terms WHERE tickets = 0")
    with op.batch_alter_table("search_terms") as batch:
        batch.drop_column("comments")
    with op.batch_alter_table("comments") as batch:
        batch.drop_column("search_body")
