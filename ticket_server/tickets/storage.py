"""One storage executor per engine: how a query runs, kept apart from what it asks.

A query is one synchronous function of SQLAlchemy Core calls over a ``Connection``. An
executor runs it as a read (``read``; ``read_point`` for a bounded read of one ticket's
rows by key) or as one write transaction (``write``), within ``database_timeout``; a
driver, pool or network failure, or the deadline passing, becomes
``DatabaseUnavailable`` (``domain.bounded``), the detail logged and never sent.

- ``SqliteStorage``: pysqlite engines on the file. A read runs in one worker thread and
  is interrupted (``sqlite3.Connection.interrupt``) when its caller gives up; a point read
  runs on the event loop on connections that never wait for a lock, falling back to a
  read when the file is locked. A write takes this process's turn, then the file's write
  lock first (``BEGIN IMMEDIATE``), and rolls back when its caller gave up.
- ``PostgresStorage``: an asyncpg engine. A read runs in autocommit mode (no BEGIN and
  ROLLBACK); a write runs in a transaction whose query locks the rows it changes
  (``SELECT ... FOR UPDATE``), and this process's writers of one row take turns before
  taking a pooled connection.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from ticket_server.tickets.domain import bounded

T = TypeVar("T")
Query = Callable[[Connection], T]


def dialect_insert(conn: Connection) -> Any:
    """The engine's ``insert`` (with ``on_conflict_do_*``). Each engine's dialect module is
    imported where that engine is in use: the PostgreSQL one is a large import that a
    server on SQLite (e.g. over stdio) never needs."""
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert

        return insert
    from sqlalchemy.dialects.postgresql import insert as postgresql_insert

    return postgresql_insert


class Storage:
    """The interface every executor gives; ``dialect``: ``"sqlite"`` or ``"postgresql"``."""

    dialect: str

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        # This process's writers queue here: on SQLite rather than in its busy handler,
        # whose sleeps starved some of them past the timeout; on PostgreSQL (per row)
        # rather than on a row lock while holding a pooled connection, which starved
        # reads of connections (bench/writes.py).
        self._write_lock = asyncio.Lock()

    async def read(self, query: Query[T]) -> T:
        """``query(connection)`` as one read."""
        raise NotImplementedError

    async def read_point(self, query: Query[T]) -> T:
        """``query(connection)``, a bounded read of one ticket's rows by key."""
        return await self.read(query)

    async def write(self, query: Query[T], *, row: str | None = None) -> T:
        """``query(connection)`` in one write transaction, committed when it returns and
        rolled back when it raises; ``row``: the key of the row it locks (None: any)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release every connection."""
        raise NotImplementedError


class SqliteStorage(Storage):
    """``engine``: pysqlite connections that wait for a lock up to the busy timeout
    (reads in worker threads, and writes); ``point_engine``: ones that never wait
    (busy timeout 0), for point reads on the event loop, where a wait would stall it."""

    dialect = "sqlite"

    def __init__(self, engine: Engine, point_engine: Engine, timeout: float) -> None:
        super().__init__(timeout)
        self._engine = engine
        self._point_engine = point_engine

    async def read(self, query: Query[T]) -> T:
        async with bounded(self.timeout):
            return await self._in_thread(query)

    async def read_point(self, query: Query[T]) -> T:
        # On the event loop: no worker-thread hop, most of a lookup's cost when the cores
        # are busy. A locked file (a writer in rollback-journal mode) or any failure: the
        # read again as any read, which waits, times out and reports failures.
        try:
            with self._point_engine.connect() as conn:
                return query(conn)
        except SQLAlchemyError:
            return await self.read(query)

    async def write(self, query: Query[T], *, row: str | None = None) -> T:
        # The write lock is taken first, waiting up to the busy timeout, so a transaction
        # never reads a state another writer is about to change. A worker thread cannot be
        # cancelled: when the caller gives up the transaction is rolled back instead of
        # committed, so "nothing was changed" stays true (short of a give-up landing during
        # the commit itself).
        abandoned = threading.Event()

        def run(conn: Connection) -> T:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # pysqlite begins none once one is open
            try:
                done = query(conn)
                if abandoned.is_set():
                    raise TimeoutError("write abandoned by its caller")
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            return done

        async with bounded(self.timeout), self._write_lock:
            try:
                return await self._in_thread(run, interrupt=False)
            except asyncio.CancelledError:
                abandoned.set()
                raise

    async def _in_thread(self, query: Query[T], *, interrupt: bool = True) -> T:
        # A worker thread cannot be cancelled: when the caller gives up (timeout,
        # cancellation) a read is interrupted (sqlite3's interrupt(), made to be called
        # from another thread), or abandoned queries would hold every worker thread. The
        # lock keeps the interrupt from reaching the connection once it is back in the
        # pool, where another read may have it.
        lock = threading.Lock()
        running: list[Any] = []

        def work() -> T:
            with self._engine.connect() as conn:
                with lock:
                    running.append(conn.connection.dbapi_connection)
                try:
                    return query(conn)
                finally:
                    with lock:
                        running.clear()

        try:
            return await asyncio.to_thread(work)
        except asyncio.CancelledError:
            if interrupt:
                with lock:
                    for dbapi_connection in running:
                        dbapi_connection.interrupt()
            raise

    async def aclose(self) -> None:
        self._engine.dispose()
        self._point_engine.dispose()


class PostgresStorage(Storage):
    """``engine``: an asyncpg engine; queries run on it through ``run_sync`` (no thread)."""

    dialect = "postgresql"

    def __init__(self, engine: AsyncEngine, timeout: float) -> None:
        super().__init__(timeout)
        self._engine = engine
        self._row_locks: dict[str, tuple[asyncio.Lock, int]] = {}  # lock, writers on it

    async def read(self, query: Query[T]) -> T:
        async with bounded(self.timeout), self._engine.connect() as conn:
            # No BEGIN and ROLLBACK around a read: two round trips fewer. Under READ
            # COMMITTED each statement takes its own snapshot inside a transaction too,
            # so a read sees exactly what it would see in one.
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            return await conn.run_sync(query)

    async def write(self, query: Query[T], *, row: str | None = None) -> T:
        async with bounded(self.timeout), self._turn(row), self._engine.begin() as conn:
            return await conn.run_sync(query)

    @asynccontextmanager
    async def _turn(self, row: str | None) -> AsyncIterator[None]:
        """This process's turn to write ``row``; any row: the turn to write at all."""
        if row is None:
            async with self._write_lock:
                yield
            return
        lock, writers = self._row_locks.get(row, (None, 0))
        lock = lock or asyncio.Lock()
        self._row_locks[row] = (lock, writers + 1)
        try:
            async with lock:
                yield
        finally:
            _, writers = self._row_locks.pop(row)
            if writers > 1:
                self._row_locks[row] = (lock, writers - 1)

    async def aclose(self) -> None:
        await self._engine.dispose()
