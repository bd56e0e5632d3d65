"""The callers table is read once per key however many lookups arrive together: a
client's first burst of calls (or every replica's callers after a restart) must not take
a connection each, which under load timed some of them out."""

from __future__ import annotations

import asyncio

from sqlalchemy import event

from ticket_server.access.callers import open_store
from ticket_server.settings import Settings


async def test_lookups_of_one_token_arriving_together_share_one_read(
    settings: Settings, add_caller
) -> None:
    token = await add_caller("burst")
    store = open_store(settings)
    reads: list[str] = []

    @event.listens_for(store.engine.sync_engine, "before_cursor_execute")
    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM callers" in statement:
            reads.append(statement)

    try:
        callers = await asyncio.gather(*(store.by_token(token) for _ in range(50)))
        waiting = [asyncio.ensure_future(store.by_name("burst")) for _ in range(5)]
        await asyncio.sleep(0)
        waiting[0].cancel()  # one caller giving up does not cancel the read the others wait for
        named = await asyncio.gather(*waiting[1:])
    finally:
        await store.aclose()
    assert {c.name for c in callers} == {"burst"} and {c.name for c in named} == {"burst"}
    assert len(reads) == 2, reads
