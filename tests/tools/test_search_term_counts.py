"""The search word counts (how many tickets and comments hold each word, for a query
word's weight) take no lock a writer of another ticket waits on: writes append deltas,
searches count them at once, and a fold adds them to ``search_terms`` outside any write
(issue 37, item 1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from fastmcp import Client
from sqlalchemy import Connection, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.helpers import scalar
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tickets.domain import AuthorType, Visibility
from ticket_server.tickets.models import Comment
from ticket_server.tickets.search import comment_search_bodies, fold_term_deltas

# Every word's comment count, folded or not.
COUNTS = """SELECT term, sum(comments) FROM (SELECT term, comments FROM search_terms
    UNION ALL SELECT term, comments FROM search_term_deltas) t GROUP BY term"""
NOTE = "Courier Quetzalcoatlx confirmed the refund for the duplicate invoice"


def _note(ticket_id: str) -> Callable[[Connection], None]:
    """What a note's write does for search, then the note itself."""

    def write(conn: Connection) -> None:
        (body,) = comment_search_bodies(conn, [NOTE])
        conn.execute(
            insert(Comment).values(
                ticket_id=ticket_id,
                author="r.mehta",
                author_type=AuthorType.AGENT,
                visibility=Visibility.INTERNAL,
                body=NOTE,
                created_at=datetime.now(UTC),
                search_body=body,
            )
        )

    return write


async def _held_note(engine: AsyncEngine, ticket_id: str, hold: float) -> float:
    """Write a note's search bookkeeping and the note, keep the transaction open ``hold``
    seconds, commit; returns when it committed (monotonic seconds)."""
    async with engine.begin() as conn:
        await conn.run_sync(_note(ticket_id))
        await asyncio.sleep(hold)
    return time.monotonic()


@pytest.mark.postgresql_only
async def test_notes_on_two_tickets_commit_side_by_side(settings: Settings) -> None:
    """C49: two notes with the same words on two different tickets, each write's
    transaction held 1 s, from two engines (two replicas): both commit in about 1 s.
    With a shared row per word (and one for the total) in the write's transaction, the
    second waited for the first to commit: about 2 s. PostgreSQL only: SQLite has one
    writer at a time by design."""
    engines = [create_async_engine(settings.database_url) for _ in range(2)]
    try:
        started = time.monotonic()
        done = await asyncio.gather(
            _held_note(engines[0], "SUP-4412", 1.0), _held_note(engines[1], "SUP-1337", 1.0)
        )
        assert max(done) - started < 1.6, f"the second write waited: {max(done) - started:.2f} s"
    finally:
        for engine in engines:
            await engine.dispose()


async def _conversation_hits(settings: Settings, query: str) -> list[str]:
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(
            "search_tickets_v2", {"query": query, "search_in": "conversation"}
        )
    return [t["id"] for t in result.structured_content["tickets"]]


def _counted(url: str, term: str) -> tuple[int, int]:
    """(comments holding ``term`` in ``search_terms``, in deltas not yet folded)."""
    folded = scalar(
        url, f"SELECT coalesce(sum(comments), 0) FROM search_terms WHERE term = '{term}'"
    )
    pending = scalar(
        url, f"SELECT coalesce(sum(comments), 0) FROM search_term_deltas WHERE term = '{term}'"
    )
    return int(folded), int(pending)


async def test_a_new_word_is_counted_before_and_after_the_fold(settings: Settings) -> None:
    """A note's words weigh in a search right after it commits (its deltas are counted),
    and a fold moves the deltas into ``search_terms`` without changing any count; a
    second fold finds nothing to do. Both engines."""
    url = settings.database_url
    engine = create_async_engine(url)
    try:
        await _held_note(engine, "SUP-4412", 0)
        await _held_note(engine, "SUP-1337", 0)
        assert _counted(url, "quetzalcoatlx") == (0, 2)
        assert set(await _conversation_hits(settings, "quetzalcoatlx")) == {"SUP-4412", "SUP-1337"}
        ranked = await _conversation_hits(settings, "quetzalcoatlx refund duplicate invoice")
        total_before = scalar(
            url,
            "SELECT (SELECT comments FROM search_terms WHERE term = '') + "
            "(SELECT coalesce(sum(comments), 0) FROM search_term_deltas WHERE term = '')",
        )

        async with engine.begin() as conn:
            folded = await conn.run_sync(fold_term_deltas)
        assert folded > 0
        assert _counted(url, "quetzalcoatlx") == (2, 0)
        assert scalar(url, "SELECT count(*) FROM search_term_deltas") == "0"
        assert scalar(url, "SELECT comments FROM search_terms WHERE term = ''") == total_before
        # The same pages in the same order: the weights did not move.
        assert (
            await _conversation_hits(settings, "quetzalcoatlx refund duplicate invoice") == ranked
        )
        async with engine.begin() as conn:
            assert await conn.run_sync(fold_term_deltas) == 0
    finally:
        await engine.dispose()


@pytest.mark.postgresql_only
async def test_replicas_folding_at_once_count_every_delta_once(settings: Settings) -> None:
    """Two engines fold the same pending deltas at once (in rows of 7, so each takes
    several turns): every delta is added exactly once. PostgreSQL: SQLite's folds take
    the write lock one at a time."""
    url = settings.database_url
    writer = create_async_engine(url)
    folders = [create_async_engine(url) for _ in range(2)]
    try:
        for ticket in ("SUP-4412", "SUP-1337", "SUP-1000", "SUP-1001", "SUP-1002"):
            await _held_note(writer, ticket, 0)
        async with writer.connect() as conn:
            before = dict((await conn.execute(text(COUNTS))).tuples().all())

        async def fold_all(engine: AsyncEngine) -> int:
            total = 0
            while True:
                async with engine.begin() as conn:
                    done = await conn.run_sync(lambda c: fold_term_deltas(c, limit=7))
                total += done
                if done == 0:
                    return total

        await asyncio.gather(*(fold_all(e) for e in folders))
        async with writer.connect() as conn:
            after = dict((await conn.execute(text(COUNTS))).tuples().all())
            pending = (await conn.execute(text("SELECT count(*) FROM search_term_deltas"))).scalar()
        assert pending == 0
        assert after == before
    finally:
        for engine in (writer, *folders):
            await engine.dispose()
