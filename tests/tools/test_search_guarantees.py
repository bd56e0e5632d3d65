"""search_tickets_v2 guarantees that a deliberate breakage showed no test held (issue 40):
rarer words weigh more, a cursor is bound to its sort, and a page with its cursor stays
within 16 KiB. Each test fails with its mutation in bench/mutations/mutations.toml."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from fastmcp import Client

from tests.helpers import text_of
from tests.tools.test_search import ids, search, ticket
from ticket_server.db import open_repository
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tools.tickets import MAX_PAGE_BYTES


async def test_a_rare_word_weighs_more_than_a_common_one(
    client: Client[Any], settings: Settings
) -> None:
    """Tickets holding one of two words each: the one holding the word few tickets hold
    ranks above the 40 holding the word many hold, though every one of them is newer."""
    old = datetime(2019, 1, 1, tzinfo=UTC)
    repo = open_repository(settings)
    await repo.add_all(
        [ticket("SUP-9700000", "Axolotl inventory", when=old)]
        + [
            ticket(f"SUP-97{i:05d}", f"Narwhal inventory {i}", when=old + timedelta(days=i))
            for i in range(1, 41)
        ]
    )
    await repo.aclose()
    found = await ids(client, query="axolotl narwhal", limit=5)
    assert found[0] == "SUP-9700000", found
    assert found[1:] == ["SUP-9700040", "SUP-9700039", "SUP-9700038", "SUP-9700037"]


async def test_a_cursor_is_refused_for_another_sort(client: Client[Any]) -> None:
    """A cursor made for one order continues that order only: sent with the other sort
    it is refused ("repeat the search"), never used to skip or repeat tickets."""
    for made, other in (("relevance", "newest"), ("newest", "relevance")):
        first = await search(client, query="refund", sort=made, limit=5)
        cursor = first.structured_content["next_cursor"]
        assert cursor is not None
        same = await search(client, query="refund", sort=made, limit=5, cursor=cursor)
        assert not same.is_error, text_of(same)
        refused = await search(client, query="refund", sort=other, limit=5, cursor=cursor)
        assert refused.is_error, (made, other)
        assert "Repeat the search without a cursor" in text_of(refused)


async def test_a_full_page_and_its_cursor_stay_within_16_kib(settings: Settings) -> None:
    """Pages filled by size (long subjects, limit 50) keep the whole result within
    16 KiB: the JSON text the model reads and structuredContent, cursor included. Subject
    lengths sweep a range of byte counts so that some page ends within a cursor's length
    of the bound."""
    when = datetime(2024, 5, 1, tzinfo=UTC)
    rows = []
    lengths = list(range(200, 300, 6))  # 17 page fills; a subject holds 300 at most
    for n, length in enumerate(lengths):
        word = f"fillword{chr(97 + n)}"
        rows += [
            ticket(
                f"SUP-98{n:02d}{i:03d}",
                f"{word} " + "x" * (length - len(word) - 1),
                when=when + timedelta(minutes=i),
            )
            for i in range(55)
        ]
    repo = open_repository(settings)
    await repo.add_all(rows)
    await repo.aclose()
    async with Client(build_server(settings)) as client:
        pages = [
            await search(client, query=f"fillword{chr(97 + n)}", limit=50)
            for n in range(len(lengths))
        ]
    for length, result in zip(lengths, pages, strict=True):
        page = result.structured_content
        assert not result.is_error and page["next_cursor"] is not None, length
        assert len(page["tickets"]) < 50, length  # cut by size, not by limit
        text = text_of(result).encode()
        compact = json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()
        assert len(text) <= MAX_PAGE_BYTES, (length, len(text))
        assert len(compact) <= MAX_PAGE_BYTES, (length, len(compact))
        assert len(text) > MAX_PAGE_BYTES - 1024, (length, len(text))  # filled, not half empty
