"""search on analyzed text: one analyzer (ticket_server.tickets.analyzer) for both engines

The full-text indexes of 0002 tokenized subject and body with each engine's own parser
(PostgreSQL split `INV-20931` into `inv` and `-20931`; no stemming on either). Now the
analyzer's tokens are stored with each ticket (`search_subject`, `search_body`, written
by the repository) and the engines index those tokens without a parser of their own:
SQLite: FTS5 external-content table `tickets_fts` over the two columns (unicode61,
`tokenchars '_'`), kept in step by triggers.
PostgreSQL: `search_vector` is the two columns cast to tsvector (a generated column,
GIN-indexed); `ticket_search_text()` goes.
`search_terms` counts the tickets holding each token (query word weights and spelling).
Existing tickets are analyzed here (data migration).

Revision ID: 0005_search_analyzer
Revises: 0004_conversation
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from alembic import op

revision = "0005_search_analyzer"
down_revision = "0004_conversation"
branch_labels = None
depends_on = None

BATCH = 2000

SQLITE_DROP_0002 = [
    "DROP TRIGGER IF EXISTS tickets_fts_au",
    "DROP TRIGGER IF EXISTS tickets_fts_ad",
    "DROP TRIGGER IF EXISTS tickets_fts_ai",
    "DROP TABLE IF EXISTS tickets_fts",
]
SQLITE_UP = [
    """CREATE VIRTUAL TABLE tickets_fts USING fts5(
        search_subject, search_body, content='tickets', content_rowid='pk',
        tokenize="unicode61 remove_diacritics 0 tokenchars '_'")""",
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
    "INSERT INTO tickets_fts(tickets_fts) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    """CREATE VIRTUAL TABLE tickets_fts USING fts5(
        subject, body, content='tickets', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER tickets_fts_ai AFTER INSERT ON tickets BEGIN
        INSERT INTO tickets_fts(rowid, subject, body) VALUES (new.pk, new.subject, new.body);
    END""",
    """CREATE TRIGGER tickets_fts_ad AFTER DELETE ON tickets BEGIN
        INSERT INTO tickets_fts(tickets_fts, rowid, subject, body)
        VALUES ('delete', old.pk, old.subject, old.body);
    END""",
    """CREATE TRIGGER tickets_fts_au AFTER UPDATE OF subject, body, pk ON tickets BEGIN
        INSERT INTO tickets_fts(tickets_fts, rowid, subject, body)
        VALUES ('delete', old.pk, old.subject, old.body);
        INSERT INTO tickets_fts(rowid, subject, body) VALUES (new.pk, new.subject, new.body);
    END""",
    "INSERT INTO tickets_fts(tickets_fts) VALUES ('rebuild')",
]

POSTGRES_DROP_0002 = [
    "DROP INDEX IF EXISTS ix_tickets_search_vector",
    "ALTER TABLE tickets DROP COLUMN IF EXISTS search_vector",
    "DROP FUNCTION IF EXISTS ticket_search_text(text)",
]
# The stored tokens hold only letters, digits and `_`, separated by spaces: the
# tsvector input syntax takes them as they are, without a text search parser.
POSTGRES_UP = [
    """ALTER TABLE tickets ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        CAST(search_subject || search_body AS tsvector)) STORED""",
    "CREATE INDEX ix_tickets_search_vector ON tickets USING gin (search_vector)",
]
POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS ix_tickets_search_vector",
    "ALTER TABLE tickets DROP COLUMN IF EXISTS search_vector",
    """CREATE OR REPLACE FUNCTION ticket_search_text(text) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
        AS $$ SELECT public.unaccent('public.unaccent'::regdictionary, lower($1)) $$""",
    """ALTER TABLE tickets ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', ticket_search_text(subject)), 'A') ||
        setweight(to_tsvector('simple', ticket_search_text(body)), 'B')) STORED""",
    "CREATE INDEX ix_tickets_search_vector ON tickets USING gin (search_vector)",
]


def _run(statements: list[str]) -> None:
    for statement in statements:
        op.execute(statement)


def _analyze_existing_tickets() -> None:
    """Fill the search columns and search_terms for the tickets already stored."""
    from ticket_server.tickets.search import TOTAL, search_columns, ticket_terms

    conn = op.get_bind()
    tickets = sa.table(
        "tickets",
        sa.column("pk", sa.Integer),
        sa.column("subject", sa.Text),
        sa.column("body", sa.Text),
        sa.column("search_subject", sa.Text),
        sa.column("search_body", sa.Text),
    )
    terms = sa.table("search_terms", sa.column("term", sa.String), sa.column("tickets", sa.Integer))
    update = (
        tickets.update()
        .where(tickets.c.pk == sa.bindparam("key"))
        .values(search_subject=sa.bindparam("s"), search_body=sa.bindparam("b"))
    )
    counts: Counter[str] = Counter()
    last = 0
    while True:
        rows = conn.execute(
            sa.select(tickets.c.pk, tickets.c.subject, tickets.c.body)
            .where(tickets.c.pk > last)
            .order_by(tickets.c.pk)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        params = []
        for pk, subject, body in rows:
            columns = search_columns(subject, body)
            counts.update(ticket_terms(columns))
            params.append({"key": pk, "s": columns["search_subject"], "b": columns["search_body"]})
        counts[TOTAL] += len(rows)
        conn.execute(update, params)
        last = rows[-1].pk
    if counts:
        conn.execute(terms.insert(), [{"term": t, "tickets": n} for t, n in sorted(counts.items())])


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        raise NotImplementedError(f"full-text search is not implemented for {dialect}")
    _run(SQLITE_DROP_0002 if dialect == "sqlite" else POSTGRES_DROP_0002)
    op.add_column(
        "tickets", sa.Column("search_subject", sa.Text(), server_default=" ", nullable=False)
    )
    op.add_column(
        "tickets", sa.Column("search_body", sa.Text(), server_default=" ", nullable=False)
    )
    op.create_table(
        "search_terms",
        sa.Column("term", sa.String(64), primary_key=True),
        sa.Column("tickets", sa.Integer(), nullable=False),
    )
    _analyze_existing_tickets()
    _run(SQLITE_UP if dialect == "sqlite" else POSTGRES_UP)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _run(
        SQLITE_DROP_0002
        if dialect == "sqlite"
        else [
            "DROP INDEX IF EXISTS ix_tickets_search_vector",
            "ALTER TABLE tickets DROP COLUMN IF EXISTS search_vector",
        ]
    )
    op.drop_table("search_terms")
    with op.batch_alter_table("tickets") as batch:
        batch.drop_column("search_body")
        batch.drop_column("search_subject")
    _run(SQLITE_DOWN if dialect == "sqlite" else POSTGRES_DOWN[2:])
