"""Alembic environment, async. The URL comes from the config (set by ``ticket_server.db``)
or, when Alembic is run by hand from the repository root, from the one Settings object.

``target_metadata`` holds every model (tickets, customers, comments, ticket events and
the access tables), so autogenerate compares the whole schema; what SQLAlchemy cannot
describe (FTS5 virtual tables, a generated tsvector column, expression indexes, an index
whose columns differ by engine) is left out by ``include_object`` and managed by hand in
the revisions.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

import ticket_server.access.models  # noqa: F401 - registers the access tables on Base
from ticket_server.settings import Settings
from ticket_server.tickets import (
    attachment_models,  # noqa: F401 - registers the attachment tables
    classification_models,  # noqa: F401 - tags, custom fields
)
from ticket_server.tickets.models import Base

config = context.config
target_metadata = Base.metadata

HAND_MANAGED_PREFIXES = ("tickets_fts", "comments_fts")
HAND_MANAGED_NAMES = frozenset(
    {
        "search_vector",
        "ix_tickets_search_vector",
        "ix_tickets_subject_trgm",
        "ix_comments_search_vector",
        "ix_tickets_counts",  # one per engine: revisions 0018, 0024 and 0025
        "created_at_us",  # SQLite's integer copies for the counts (revision 0025)
        "sla_breach_at_us",
    }
)


def include_object(obj, name, type_, reflected, compare_to) -> bool:  # type: ignore[no-untyped-def]
    """False for the full-text objects the revisions create by hand (see module docstring)."""
    if name is None:
        return True
    return not (name.startswith(HAND_MANAGED_PREFIXES) or name in HAND_MANAGED_NAMES)


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or Settings().database_url


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_migrations_online() -> None:
    engine = create_async_engine(_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_migrations_online())
