"""The database engine and the migration state: the one module that owns connections.

SQLite (aiosqlite) is the embedded default; PostgreSQL (asyncpg) is the production
engine. Both are chosen by ``Settings.database_url`` alone.

Alembic is imported only by the commands that migrate: a serving process checks the
database's revision against ``ticket_server.migrations.HEAD`` with one query.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ticket_server import compat
from ticket_server.settings import Settings

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Engine
    from sqlalchemy.ext.asyncio import AsyncEngine

    from ticket_server.tickets.repository import TicketRepository


def migrations_dir() -> Path:
    """The Alembic scripts: ``migrations/`` at the repository's top, installed as the
    package ``ticket_server.migrations`` (found without running its code)."""
    from importlib.util import find_spec

    spec = find_spec("ticket_server.migrations")
    assert spec is not None and spec.origin is not None, "ticket_server.migrations is not installed"
    return Path(spec.origin).parent


class DatabaseSetupError(Exception):
    """The database cannot be served as configured; the message says what fixes it."""


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _unicode_lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


MULTIROW_INSERT_ROWS = 50
"""Rows of one INSERT statement of an engine made with ``multirow_inserts``."""


def create_engine(
    settings: Settings,
    *,
    for_serving: bool = True,
    page_cache_kib: int | None = None,
    multirow_inserts: bool = False,
) -> AsyncEngine:
    """An async engine for ``settings.database_url``.

    For serving an SQLite file, the file is opened read-write without creation
    (``mode=rw``): a file removed under a running server must surface as "unavailable",
    not be silently recreated empty. Pooled SQLite connections are dropped when the file
    on disk is replaced (inode check at checkout), so the server follows the file an
    operator restores without a restart. Every SQLite connection puts the file in the
    journal mode of ``settings.sqlite_journal_mode``: WAL by default (the ``-wal`` and
    ``-shm`` files live beside it). ``page_cache_kib`` caps each SQLite connection's page
    cache (``PRAGMA cache_size``; SQLite's default is 2,000 KiB). ``multirow_inserts``:
    on SQLite, an INSERT given many rows is sent as INSERT statements of many VALUES rows
    (SQLAlchemy's "insertmanyvalues") instead of pysqlite's ``executemany()``, which
    releases the GIL around each row's step and takes it back before the next: while the
    event loop's thread is busy, each retake waits out the interpreter's switch interval
    (``sys.getswitchinterval()``, 5 ms by default), and every switch slows the
    event loop's thread too. A statement holds at most ``MULTIROW_INSERT_ROWS`` rows, and
    those connections keep at most 4 prepared statements: SQLite's compiled form of an
    INSERT grows with its rows, the row count differs from batch to batch, and pysqlite's
    default cache (128) would keep one per count seen; with none at all, compiling and
    freeing a statement for every batch fragments the writing thread's heap.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    url = make_url(settings.database_url)
    connect_args: dict[str, object] = {}
    path = settings.sqlite_path
    if path is not None:
        connect_args["timeout"] = settings.database_timeout
        if multirow_inserts:
            connect_args["cached_statements"] = 4
        if for_serving:
            url = url.set(database=f"file:{path}?mode=rw", query={"uri": "true"})
    elif url.get_backend_name() == "postgresql":
        connect_args["timeout"] = settings.database_timeout
        connect_args["command_timeout"] = settings.database_timeout
        # asyncpg expires its cached statements by a timer per entry, made in the context
        # of the request that first ran the statement: that request (its arguments, an
        # upload's base64 included) stayed in memory for the timer's 300 s. The cache
        # stays bounded by its size (100 statements per connection).
        connect_args["max_cached_statement_lifetime"] = 0
        import asyncpg  # type: ignore[import-untyped]

        connect_args["async_creator_fn"] = compat.connect_apart(asyncpg.connect)
    engine = create_async_engine(
        url,
        connect_args=connect_args,
        pool_pre_ping=path is None,
        pool_timeout=settings.database_timeout,
        # Error messages (logged when the database fails) name the statement, never its
        # parameters: a token hash or a customer's text is not log material.
        hide_parameters=True,
        **(
            {"insertmanyvalues_page_size": MULTIROW_INSERT_ROWS}
            if multirow_inserts and path is not None
            else {}
        ),
    )
    if path is not None:
        _watch_sqlite_file(engine.sync_engine, path, settings.sqlite_journal_mode, page_cache_kib)
        if multirow_inserts:  # a documented Dialect attribute; psycopg2's dialect sets it
            engine.dialect.use_insertmanyvalues_wo_returning = True
    return engine


def create_sqlite_sync_engine(settings: Settings, *, wait: bool = True) -> Engine | None:
    """For an SQLite database, a synchronous (pysqlite) engine on the file, opened as
    ``create_engine`` opens it for serving: ``SqliteStorage`` runs reads and write
    transactions on it in worker threads. ``wait=False``: its connections never wait for
    a lock (busy timeout 0), for point reads on the event loop. None for any other
    database."""
    from sqlalchemy import create_engine as create_sync_engine
    from sqlalchemy.engine import make_url

    path = settings.sqlite_path
    if path is None:
        return None
    engine = create_sync_engine(
        make_url("sqlite+pysqlite://").set(database=f"file:{path}?mode=rw", query={"uri": "true"}),
        # Worker threads share the pool; each connection is used by one thread at a time.
        connect_args={
            "timeout": settings.database_timeout if wait else 0,
            "check_same_thread": False,
        },
        pool_timeout=settings.database_timeout,
        hide_parameters=True,
    )
    _watch_sqlite_file(engine, path, settings.sqlite_journal_mode)
    return engine


def _watch_sqlite_file(
    engine: Engine, path: Path, journal_mode: str, page_cache_kib: int | None = None
) -> None:
    from sqlalchemy import event
    from sqlalchemy.exc import DisconnectionError

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        record.info["inode"] = _inode(path)
        # SQLite's lower() folds ASCII only; search_tickets promises case-insensitive
        # matching for every script (PostgreSQL's lower() already does this).
        dbapi_connection.create_function("lower", 1, _unicode_lower, deterministic=True)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        # Write-ahead log: readers keep reading while a writer commits (the rollback
        # journal blocks them for the commit). Kept in the file once set; the busy
        # timeout (connect_args "timeout") still bounds the wait for the write lock.
        # The rollback journal is the setting's other choice (network filesystems).
        cursor.execute(f"PRAGMA journal_mode={journal_mode}")
        if page_cache_kib is not None:
            cursor.execute(f"PRAGMA cache_size=-{int(page_cache_kib)}")  # negative: KiB, not pages
        cursor.close()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection, record, proxy) -> None:  # type: ignore[no-untyped-def]
        if _inode(path) != record.info.get("inode"):
            # SQLAlchemy's pessimistic-disconnect protocol: the pool discards this
            # connection and opens a new one on the current file.
            raise DisconnectionError("the SQLite file was replaced or removed")


def open_repository(settings: Settings) -> TicketRepository:
    """A repository on ``settings.database_url``, its queries run by the engine's storage
    executor (``tickets.storage``); no connection is opened until a query."""
    from ticket_server.tickets.repository import TicketRepository
    from ticket_server.tickets.storage import PostgresStorage, SqliteStorage, Storage

    storage: Storage
    timeout = settings.database_timeout
    engine = create_sqlite_sync_engine(settings)
    if engine is not None:
        point_engine = create_sqlite_sync_engine(settings, wait=False)
        assert point_engine is not None
        storage = SqliteStorage(engine, point_engine, timeout)
    else:
        storage = PostgresStorage(create_engine(settings), timeout)
    return TicketRepository(storage, settings.search_synonyms)


def alembic_config(database_url: str) -> Config:  # alembic imported lazily: start-up cost
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def head_revision(database_url: str) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()


def upgrade(database_url: str, revision: str = "head") -> None:
    """Run Alembic migrations up to ``revision`` (creates an SQLite file if missing).
    ``DatabaseSetupError`` (one line) for an unknown revision or an unreachable database."""
    from alembic import command

    _ensure_sqlite_folder(database_url, create_default=True)
    _migrate(command.upgrade, database_url, revision)


def downgrade(database_url: str, revision: str) -> None:
    """Run Alembic migrations back to ``revision`` (``base``: no tables at all)."""
    from alembic import command

    _migrate(command.downgrade, database_url, revision)


def _migrate(step, database_url: str, revision: str) -> None:  # type: ignore[no-untyped-def]
    from alembic.script import ScriptDirectory
    from alembic.script.revision import RevisionError
    from alembic.util.exc import CommandError as AlembicError
    from sqlalchemy.exc import SQLAlchemyError

    config = alembic_config(database_url)
    try:
        if revision not in ("head", "heads", "base") and not revision.lstrip("+-").isdigit():
            ScriptDirectory.from_config(config).get_revision(revision)  # before connecting
        step(config, revision)
    except (AlembicError, RevisionError) as exc:
        raise DatabaseSetupError(
            f"revision {revision!r}: {_first_line(exc)}; give `head`, `base`, -1 or a revision id "
            f"(ticket_server/migrations/versions/)"
        ) from None
    except (SQLAlchemyError, OSError) as exc:
        raise _unreachable(exc, database_url) from None


async def table_names(settings: Settings) -> list[str]:
    """The tables in the database at ``settings.database_url``, sorted; [] if it has none."""
    from sqlalchemy import inspect

    path = settings.sqlite_path
    if path is not None and not path.exists():
        return []
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            return sorted(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
    except Exception as exc:  # the driver's own message says what is wrong
        raise _unreachable(exc, settings.database_url) from None
    finally:
        await engine.dispose()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else "no detail"


def _unreachable(exc: BaseException, database_url: str | None = None) -> DatabaseSetupError:
    problem = sqlite_write_problem(database_url) if database_url is not None else None
    if problem is not None:
        return DatabaseSetupError(problem)
    return DatabaseSetupError(
        f"TICKET_SERVER_DATABASE_URL: cannot open the database ({type(exc).__name__}: "
        f"{_first_line(exc)}); check that it runs and the URL names it"
    )


def sqlite_write_problem(database_url: str) -> str | None:
    """Why this process cannot write the SQLite file of ``database_url`` (None when it can,
    when the file does not exist yet, and for other engines), in one line naming the setting:
    every command that writes and every server (audit rows) needs the file writable, and its
    folder too, where SQLite keeps the file's -wal and -shm (or -journal) beside it."""
    path = Settings(database_url=database_url).sqlite_path
    if path is None or not path.exists():
        return None
    if not os.access(path, os.W_OK):
        return (
            f"TICKET_SERVER_DATABASE_URL: the SQLite file {path} is read-only for this user; "
            "make it writable (e.g. chmod u+w, or run as its owner): the server and these "
            "commands write to it"
        )
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return (
            f"TICKET_SERVER_DATABASE_URL: the folder {path.parent} is read-only for this user, "
            "and SQLite keeps the database's -wal and -shm files beside it; make the folder "
            "writable (or move the file to one that is)"
        )
    return None


def _ensure_sqlite_folder(database_url: str, *, create_default: bool) -> None:
    settings = Settings(database_url=database_url)
    path = settings.sqlite_path
    if path is None or path.parent.is_dir():
        return
    if create_default and settings.uses_default_database:
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    relative = (
        ""
        if path.is_absolute()
        else f" (a relative path, from the folder the server starts in, {Path.cwd()}: "
        "three slashes after sqlite+aiosqlite: begin a relative path, four an absolute one)"
    )
    raise DatabaseSetupError(
        f"TICKET_SERVER_DATABASE_URL: the folder {path.parent} does not exist{relative}; "
        "create it first"
    )


@dataclass(frozen=True)
class MigrationState:
    current: str | None
    head: str | None

    @property
    def is_current(self) -> bool:
        return self.current == self.head


async def migration_state(settings: Settings, engine: AsyncEngine | None = None) -> MigrationState:
    """The database's Alembic revision against the code's head (``migrations.HEAD``),
    read on ``engine`` (left open) or on an engine of its own (disposed).

    Raises ``DatabaseSetupError`` (one line, naming the setting) when the database
    cannot be reached at all.
    """
    from ticket_server.migrations import HEAD

    path = settings.sqlite_path
    if settings.uses_default_database and path is not None and not path.exists():
        return MigrationState(current=None, head=HEAD)  # `db upgrade` makes it, folder too
    _ensure_sqlite_folder(settings.database_url, create_default=False)
    if path is not None and not path.exists():
        return MigrationState(current=None, head=HEAD)
    from sqlalchemy import text

    own = engine is None
    engine = create_engine(settings) if engine is None else engine
    try:
        async with engine.connect() as conn:
            has_table = await conn.run_sync(
                lambda sync: sync.dialect.has_table(sync, "alembic_version")
            )
            current = None
            if has_table:
                current = (
                    await conn.execute(text("SELECT version_num FROM alembic_version"))
                ).scalar()
    except Exception as exc:  # the driver's own message says what is wrong
        raise _unreachable(exc, settings.database_url) from exc
    finally:
        if own:
            await engine.dispose()
    return MigrationState(current=current, head=HEAD)


async def require_current_schema(settings: Settings, engine: AsyncEngine | None = None) -> None:
    """``DatabaseSetupError`` (one line saying what to run) unless the database is
    reachable and at the code's migration head: checked before anything is served
    (on ``engine`` when given, as ``migration_state``)."""
    state = await migration_state(settings, engine)
    if state.current is None:
        raise DatabaseSetupError(
            "the ticket database has no schema yet; run `ticket-server db upgrade` "
            "(and `ticket-server db seed` for the sample tickets)"
        )
    if not state.is_current:
        raise DatabaseSetupError(
            f"the ticket database is at revision {state.current}, not the latest "
            f"{state.head}; run `ticket-server db upgrade`"
        )
