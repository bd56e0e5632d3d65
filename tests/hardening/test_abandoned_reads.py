"""A read the caller gave up on (timeout, cancellation) is interrupted, not left running:
SQLite reads run in worker threads, which cannot be cancelled, and abandoned slow
queries would otherwise hold every worker and make the next cheap lookup time out."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Connection, text

from ticket_server.db import open_repository
from ticket_server.settings import Settings
from ticket_server.tickets.domain import DatabaseUnavailable

# Counts to 20 million: seconds of CPU in SQLite (the reads time out after 0.3 s),
# unless interrupted; short enough that a broken interrupt still ends the test soon.
SLOW = text(
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20000000) SELECT count(*) FROM c"
)


WORKERS = 4


@pytest.mark.sqlite_only
async def test_timed_out_reads_free_their_threads(settings: Settings) -> None:
    """Twice as many slow reads as worker threads time out; then a cheap lookup is
    answered. The pool is sized here (WORKERS), not by the machine's core count, so
    without the interrupt every worker is still counting and the lookup, queued behind
    them, times out: the regression shows on any machine. Nothing is timed."""
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(WORKERS, thread_name_prefix="test-read")
    )
    repo = open_repository(settings.model_copy(update={"database_timeout": 0.3}))
    try:

        def slow(conn: Connection) -> int:
            return int(conn.execute(SLOW).scalar_one())

        outcomes = await asyncio.gather(
            *(repo.read(slow) for _ in range(2 * WORKERS)), return_exceptions=True
        )
        assert all(isinstance(o, DatabaseUnavailable) for o in outcomes), outcomes
        ticket = await repo.get("SUP-4412")
        assert ticket is not None and ticket.id == "SUP-4412"
    finally:
        await repo.aclose()


async def full_read(repo):  # type: ignore[no-untyped-def]
    return await repo.ticket_view(
        "SUP-4412", None, comments_before=None, comment_limit=11, event_limit=20
    )


@pytest.mark.sqlite_only
async def test_a_lookup_skips_the_worker_thread_unless_the_file_is_locked(
    settings: Settings,
    db_path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ticket lookup (one row by key) and the full read of one ticket read on the event
    loop while the file is free; while another process holds it locked (possible in
    rollback-journal mode), each waits in a worker thread like every read and is
    answered "unavailable" after the timeout; then they read on the loop again."""
    import sqlite3

    import ticket_server.tickets.storage as storage

    hops: list[object] = []
    real = asyncio.to_thread

    async def counted(function, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        hops.append(function)
        return await real(function, *args, **kwargs)

    monkeypatch.setattr(storage.asyncio, "to_thread", counted)
    for journal_mode in ("wal", "delete"):
        repo = open_repository(
            settings.model_copy(
                update={"database_timeout": 0.3, "sqlite_journal_mode": journal_mode}
            )
        )
        try:
            assert (await repo.get("SUP-4412")).id == "SUP-4412"  # type: ignore[union-attr]
            assert (await full_read(repo)).ticket.id == "SUP-4412"  # type: ignore[union-attr]
            assert hops == []
        finally:
            await repo.aclose()
    # The rollback journal (the last mode set) stays in the file: a reader can be locked out.
    repo = open_repository(
        settings.model_copy(update={"database_timeout": 0.3, "sqlite_journal_mode": "delete"})
    )
    try:
        holder = sqlite3.connect(db_path, timeout=0)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(DatabaseUnavailable):
                await repo.get("SUP-4412")
            with pytest.raises(DatabaseUnavailable):
                await full_read(repo)
            assert len(hops) == 2
        finally:
            holder.rollback()
            holder.close()
        assert (await repo.get("SUP-4412")).id == "SUP-4412"  # type: ignore[union-attr]
        assert (await full_read(repo)).ticket.id == "SUP-4412"  # type: ignore[union-attr]
        assert len(hops) == 2
    finally:
        await repo.aclose()
