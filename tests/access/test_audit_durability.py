"""Issue 16, item 5: audit rows survive a database that does not take them for a while
(kept, in order, and retried with backoff); the loss of a row when the bounded queue is
full, or still queued at stop, is counted in a metric and logged at ERROR; old rows are
pruned by `ticket-server audit prune`; SIGKILL under load loses a measured few."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.access.conftest import audit_rows, modern_call
from tests.transports.conftest import TICKET_SERVER, add_caller, start_http_server
from ticket_server.access.audit import AuditWriter
from ticket_server.access.callers import open_store
from ticket_server.access.context import CallRecord
from ticket_server.metrics import Metrics
from ticket_server.settings import Settings


def _row(i: int, when: datetime | None = None) -> dict:
    return CallRecord(tool="get_ticket_status_v2", trace_id=f"{i:032d}").as_row(
        when or datetime.now(UTC)
    )


@pytest.mark.sqlite_only
async def test_rows_wait_for_a_database_that_comes_back(
    db_path: Path, tmp_path: Path, caplog
) -> None:
    """The database file is away (as during a restore), then back: nothing is lost. The
    writer's mechanism is the same on every engine; SQLite makes "away" exact."""
    away = tmp_path / "away.db"
    shutil.move(db_path, away)
    settings = Settings(database_url=f"sqlite+aiosqlite:///{db_path}", database_timeout=1.0)
    metrics = Metrics()
    store = open_store(settings)
    writer = AuditWriter(
        store, batch_size=2, queue_limit=100, dropped=metrics.audit_rows_dropped.inc
    )
    try:
        for i in range(5):
            writer.submit(_row(i))
        with caplog.at_level(logging.WARNING):
            assert await writer.flush() == 0
        assert writer.pending == 5 and "retrying in 0.5 s" in caplog.text
        assert await writer.flush() == 0 and "retrying in 1 s" in caplog.text  # backoff doubles
        await store.aclose()  # pooled connections to the missing file are dropped
        shutil.move(away, db_path)
        assert await writer.flush() == 5 and writer.pending == 0
    finally:
        await store.aclose()
    rows = await audit_rows(settings)
    assert [r.trace_id for r in rows] == [f"{i:032d}" for i in range(5)]
    assert "ticket_server_audit_rows_dropped_total 0.0" in metrics.render().decode()


@pytest.mark.sqlite_only
async def test_a_full_queue_counts_and_logs_each_lost_row(
    db_path: Path, tmp_path: Path, caplog
) -> None:
    shutil.move(db_path, tmp_path / "away.db")
    settings = Settings(database_url=f"sqlite+aiosqlite:///{db_path}", database_timeout=1.0)
    metrics = Metrics()
    store = open_store(settings)
    writer = AuditWriter(store, queue_limit=3, dropped=metrics.audit_rows_dropped.inc)
    try:
        with caplog.at_level(logging.ERROR):
            for i in range(5):
                writer.submit(_row(i))
            assert writer.pending == 3
            await writer.stop()  # the database is still away: the 3 queued rows are lost too
    finally:
        await store.aclose()
    assert "ticket_server_audit_rows_dropped_total 5.0" in metrics.render().decode()
    errors = [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR and r.name == "ticket_server.access.audit"
    ]
    assert len(errors) == 3 and "audit rows lost at stop: 3" in errors[-1].getMessage()


async def test_a_row_the_database_refuses_is_lost_alone_and_counted(
    settings: Settings, caplog
) -> None:
    """A row no retry can write (here an outcome the table's constraint refuses; on
    PostgreSQL also text longer than its column) is lost on its own, counted and logged:
    it never holds back the rows queued behind it."""
    metrics = Metrics()
    store = open_store(settings)
    writer = AuditWriter(store, batch_size=10, dropped=metrics.audit_rows_dropped.inc)
    try:
        for i in range(5):
            writer.submit({**_row(i), "outcome": "bogus"} if i == 2 else _row(i))
        with caplog.at_level(logging.ERROR):
            assert await writer.flush() == 4 and writer.pending == 0
    finally:
        await store.aclose()
    assert [r.trace_id for r in await audit_rows(settings)] == [f"{i:032d}" for i in (0, 1, 3, 4)]
    assert "ticket_server_audit_rows_dropped_total 1.0" in metrics.render().decode()
    lost = [r for r in caplog.records if "audit row refused by the database" in r.getMessage()]
    assert [getattr(r, "trace_id", None) for r in lost] == [f"{2:032d}"]
    # the failure is named for the audit trail, never as an outage of the callers registry
    assert not [r for r in caplog.records if "callers registry" in r.getMessage()]
    assert [r for r in caplog.records if r.getMessage() == "audit trail unavailable"]


async def test_rows_queued_during_a_flush_wait_for_the_next_batch(settings: Settings) -> None:
    """A flush writes the rows queued when it began. Rows of calls that end meanwhile
    wait for the next wake, so a steady stream of calls is written in full batches, not
    a few rows per transaction while the stream lasts. Stop still writes them all."""
    store = open_store(settings)
    batches: list[int] = []

    class Watched(AuditWriter):
        async def _insert(self, rows: list[dict]) -> None:
            batches.append(len(rows))
            if len(batches) <= 2:  # a call ends while this batch is written
                self.submit(_row(100 + len(batches)))
            await super()._insert(rows)

    writer = Watched(store, batch_size=3)
    try:
        for i in range(5):
            writer.submit(_row(i))
        assert await writer.flush() == 5 and batches == [3, 2] and writer.pending == 2
        await writer.stop()
        assert batches == [3, 2, 2] and writer.pending == 0
    finally:
        await store.aclose()
    assert [r.trace_id for r in await audit_rows(settings)] == [
        f"{i:032d}" for i in (0, 1, 2, 3, 4, 101, 102)
    ]


@pytest.mark.sqlite_only
async def test_a_batch_goes_to_sqlite_in_statements_of_many_rows(settings: Settings) -> None:
    """On SQLite a batch is written as INSERTs of many VALUES rows each, not row by row
    (pysqlite's executemany() gives the GIL up and waits to take it back for every row
    while the event loop's thread is busy: a batch of 200 then took about a second).
    SQLAlchemy's event says executemany either way; the statements' row groups tell."""
    from sqlalchemy import event

    from ticket_server.db import MULTIROW_INSERT_ROWS

    store = open_store(settings)
    sent: list[int] = []  # VALUES rows of each statement sent to the database

    def before(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if "audit_events" in statement:
            sent.append(statement.count("(?"))

    event.listen(store.engine.sync_engine, "before_cursor_execute", before)
    writer = AuditWriter(store, batch_size=200)
    try:
        for i in range(120):
            writer.submit(_row(i))
        assert await writer.flush() == 120
    finally:
        await store.aclose()
    full, rest = divmod(120, MULTIROW_INSERT_ROWS)
    assert sent == [MULTIROW_INSERT_ROWS] * full + [rest] * bool(rest)
    assert [r.trace_id for r in await audit_rows(settings)] == [f"{i:032d}" for i in range(120)]


@pytest.mark.sqlite_only
async def test_batches_of_every_size_leave_few_compiled_statements_behind(
    settings: Settings,
) -> None:
    """Each row count is another statement, and SQLite's compiled form of one grows with
    its rows: pysqlite's default cache (128 statements) kept one per count seen, on each
    of the store's connections. SQLite's ``sqlite_stmt`` table lists a connection's
    prepared statements."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    store = open_store(settings)
    writer = AuditWriter(store, batch_size=1000)
    try:
        for size in range(1, 61):
            for i in range(size):
                writer.submit(_row(i))
            assert await writer.flush() == size
        async with store.engine.connect() as conn:  # the one connection the writer used
            try:
                kept = await conn.scalar(
                    text(
                        "SELECT count(*) FROM sqlite_stmt WHERE sql LIKE 'INSERT INTO audit_events%'"
                    )
                )
            except OperationalError:  # no such table
                pytest.skip("this SQLite is built without SQLITE_ENABLE_STMTVTAB")
    finally:
        await store.aclose()
    assert 1 <= kept <= 4


def test_audit_prune_deletes_rows_older_than_asked(settings: Settings) -> None:
    now = datetime.now(UTC)

    async def fill() -> None:
        store = open_store(settings)
        writer = AuditWriter(store)
        for i, age in enumerate((200, 100, 80, 1)):
            writer.submit(_row(i, now - timedelta(days=age)))
        assert await writer.flush() == 4
        await store.aclose()

    asyncio.run(fill())
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    env["TICKET_SERVER_DATABASE_URL"] = settings.database_url

    def prune(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*TICKET_SERVER, "audit", "prune", *args],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = prune("--older-than", "150d")
    assert done.returncode == 0 and "1 audit row(s)" in done.stderr, done.stderr
    done = prune()  # TICKET_SERVER_AUDIT_RETENTION_DAYS, 90 by default
    assert done.returncode == 0 and "1 audit row(s)" in done.stderr, done.stderr
    done = prune(TICKET_SERVER_AUDIT_RETENTION_DAYS="30")
    assert done.returncode == 0 and "1 audit row(s)" in done.stderr, done.stderr
    assert [r.trace_id for r in asyncio.run(audit_rows(settings))] == [f"{3:032d}"]
    assert prune("--older-than", "soon").returncode != 0
    # An age that would take the last hour's rows too (0d: every row) is refused, one
    # line saying what to do, and nothing is deleted; --yes does it.
    refused = prune("--older-than", "0d")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--older-than 0d" in refused.stderr and "--yes" in refused.stderr, refused.stderr
    assert len(asyncio.run(audit_rows(settings))) == 1
    done = prune("--older-than", "0d", "--yes")
    assert done.returncode == 0 and "1 audit row(s)" in done.stderr, done.stderr
    assert asyncio.run(audit_rows(settings)) == []


@pytest.mark.slow
def test_sigkill_under_load_loses_few_rows(db_path: Path, tmp_path: Path) -> None:
    """1,000 lookups from 8 threads on a real HTTP server, SIGKILL right after the last
    answer: prints rows lost per thousand answered calls (what the README states)."""
    import httpx2 as httpx

    token = add_caller(db_path, "loader")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_HTTP_RATE_LIMIT="100000/minute")
    answered = 0
    lock = threading.Lock()

    def work(n: int) -> None:
        nonlocal answered
        with httpx.Client(timeout=30) as http:
            for i in range(n):
                response = modern_call(
                    http,
                    server.url,
                    token,
                    i,
                    {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-4412"}},
                )
                if response.status_code == 200:
                    with lock:
                        answered += 1

    try:
        threads = [threading.Thread(target=work, args=(125,)) for _ in range(8)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - started
    finally:
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
    rows = len(
        asyncio.run(
            audit_rows(Settings(database_url=f"sqlite+aiosqlite:///{db_path}"), limit=10_000)
        )
    )
    lost = answered - rows
    print(
        f"\nSIGKILL after {answered} answered calls in {seconds:.1f} s: {rows} audit rows, "
        f"{lost} lost = {1000 * lost / max(answered, 1):.1f} per thousand"
    )
    assert answered == 1000 and 0 <= lost <= answered
