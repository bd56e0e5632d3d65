"""A read the caller gave up on (timeout, cancellation) is interrupted, not left running:
SQLite reads run in worker threads, which cannot be cancelled, and abandoned slow
queries would otherwise hold every worker and make the next cheap lookup time out."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import Connection, text

from ticket_server.db import open_repository
from ticket_server.settings import Settings
from ticket_server.tickets.domain import DatabaseUnavailable

# Counts to 200 million: many seconds in SQLite, unless interrupted.
SLOW = text("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000000) SELECT count(*) FROM c")


@pytest.mark.sqlite_only
async def test_timed_out_reads_free_their_threads(settings: Settings) -> None:
    repo = open_repository(settings.model_copy(update={"database_timeout": 0.3}))
    try:
        def slow(conn: Connection) -> int:
            return int(conn.execute(SLOW).scalar_one())

        started = time.monotonic()
        outcomes = await asyncio.gather(*(repo._read(slow) for _ in range(12)), return_exceptions=True)
        assert all(isinstance(o, DatabaseUnavailable) for o in outcomes), outcomes
        assert time.monotonic() - started < 2
        # More abandoned reads than worker threads: without the interrupt every worker
        # would still be counting, and this lookup would wait for one and time out.
        ticket = await repo.get("SUP-4412")
        assert ticket is not None and ticket.id == "SUP-4412"
    finally:
        await repo.aclose()
