"""Issue 32, the timing signal: a caller limited to queues searching words that only
other queues hold must not be told so by how long the search takes. The structural
cause was one extra query per word held somewhere (is it held in the caller's queues?),
none for a word held nowhere; now every word of a scoped search is checked in one
statement, held elsewhere or not. (The figures are in ``bench/scope_timing.py``; a test
counts statements, which do not depend on the machine's load.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastmcp import Client
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.helpers import column
from ticket_server.tickets.analyzer import query_words, spelling_candidates

NOWHERE = " ".join(f"zqx{chr(97 + i)}vul{chr(97 + i)}morp" for i in range(16))


def _words_only_other_queues_hold(database_url: str) -> str:
    held = column(
        database_url,
        "SELECT t.search_subject || ' ' || t.search_body FROM tickets t WHERE t.queue = 'billing' "
        "UNION ALL SELECT c.search_body FROM comments c JOIN tickets t ON t.id = c.ticket_id "
        "WHERE t.queue = 'billing'",
    )
    billing = {token for text in held for token in text.split()}
    words: dict[str, str] = {}
    for subject in column(database_url, "SELECT subject FROM tickets WHERE queue <> 'billing'"):
        for token, typed in query_words(subject, limit=None):
            fresh = typed.isalpha() and len(typed) > 4 and token not in billing | words.keys()
            if fresh and not billing & spelling_candidates(typed).keys():
                words[token] = typed
    assert len(words) >= 16
    return " ".join(list(words.values())[:16])


@contextmanager
def _ticket_reads() -> Iterator[list[str]]:
    """The statements that read tickets or their words while the block runs."""
    seen: list[str] = []

    def before(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        text = statement.lstrip().upper()
        if text.startswith(("SELECT", "WITH")) and "CALLERS" not in text:
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", before)


async def test_words_held_elsewhere_cost_a_scoped_search_no_extra_query(
    settings, add_caller, server_as
) -> None:
    await add_caller("billing-only", queues=["billing"])
    elsewhere = _words_only_other_queues_hold(settings.database_url)
    arguments = {"search_in": "conversation", "limit": 50}
    async with Client(server_as(stdio_caller="billing-only")) as client:
        counts, answers = [], []
        for query in (elsewhere, NOWHERE, elsewhere):  # warm first (the caller cached)
            with _ticket_reads() as reads:
                result = await client.call_tool("search_tickets_v2", {"query": query, **arguments})
            counts.append(len(reads))
            answers.append(result.structured_content)
    _, nowhere_count, elsewhere_count = counts
    assert elsewhere_count == nowhere_count, counts
    for answer in answers[1:]:  # both say the same: nothing found, nothing corrected
        assert answer["tickets"] == [] and answer["next_cursor"] is None
        assert answer["note"].startswith("No ticket or comment contains any of")
