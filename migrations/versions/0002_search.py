"""full-text search index over ticket subject and body

SQLite: an FTS5 external-content table keyed by tickets.pk, tokenizer unicode61 with
remove_diacritics 2 (case and accents folded: `cafe` finds `café`), kept in step with
the tickets table by triggers.
PostgreSQL: a generated tsvector column (`simple` configuration over unaccent, so
accents and case fold the same way as on SQLite and no language stemming surprises
a query) with a GIN index; pg_trgm GIN index on lower(subject) for the substring
search of `search_tickets`.

Revision ID: 0002_search
Revises: 0001_tickets
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002_search"
down_revision = "0001_tickets"
branch_labels = None
depends_on = None

SQLITE_UP = [
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
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS tickets_fts_au",
    "DROP TRIGGER IF EXISTS tickets_fts_ad",
    "DROP TRIGGER IF EXISTS tickets_fts_ai",
    "DROP TABLE IF EXISTS tickets_fts",
]

# unaccent() is only STABLE; a generated column needs an IMMUTABLE expression, hence
# the two-argument form (explicit dictionary) wrapped in an IMMUTABLE SQL function.
POSTGRES_UP = [
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    """CREATE OR REPLACE FUNCTION ticket_search_text(text) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
        AS $$ SELECT public.unaccent('public.unaccent'::regdictionary, lower($1)) $$""",
    """ALTER TABLE tickets ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', ticket_search_text(subject)), 'A') ||
        setweight(to_tsvector('simple', ticket_search_text(body)), 'B')) STORED""",
    "CREATE INDEX ix_tickets_search_vector ON tickets USING gin (search_vector)",
    "CREATE INDEX ix_tickets_subject_trgm ON tickets USING gin (lower(subject) gin_trgm_ops)",
]
POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS ix_tickets_subject_trgm",
    "DROP INDEX IF EXISTS ix_tickets_search_vector",
    "ALTER TABLE tickets DROP COLUMN IF EXISTS search_vector",
    "DROP FUNCTION IF EXISTS ticket_search_text(text)",
]


def _run(statements: list[str]) -> None:
    for statement in statements:
        op.execute(statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _run(SQLITE_UP)
    elif dialect == "postgresql":
        _run(POSTGRES_UP)
    else:
        raise NotImplementedError(f"full-text search is not implemented for {dialect}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _run(SQLITE_DOWN)
    elif dialect == "postgresql":
        _run(POSTGRES_DOWN)
