"""search_tickets_v2 ranks relevance within windows of the newest matches: each window
best first, windows newest first, every match reachable by paging exactly once.

A window of 25 over the 2,400-ticket sample makes every frequent word span many
windows; the default window (1,000) is larger than any match set of the sample, so it
gives the exact ranking to compare with.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import pytest
from fastmcp import Client

from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tools.cursor import CursorCodec, CursorError
from tests.helpers import column, text_of
from tests.tools.test_v2 import page_through, search

WINDOW = 25


@pytest.fixture
async def windowed(settings: Settings) -> AsyncIterator[Client]:
    async with Client(build_server(settings.model_copy(update={"search_rank_window": WINDOW}))) as client:
        yield client


@pytest.fixture
async def exact(settings: Settings) -> AsyncIterator[Client]:
    async with Client(build_server(settings)) as client:
        yield client


def ids(hits: list[dict]) -> list[str]:
    return [h["id"] for h in hits]


@pytest.mark.parametrize(("query", "filters"), [
    ("customer", {}),
    ("support team", {}),
    ("invoice", {"status": ["open", "waiting_on_customer", "new"]}),
    ("account", {"queue": "billing"}),
])
@pytest.mark.parametrize("limit", [7, 25, 50])
async def test_paging_across_windows_returns_every_match_once(
    windowed: Client, exact: Client, query: str, filters: dict, limit: int
) -> None:
    truth = ids(await page_through(exact, query=query, **filters, limit=50))
    assert len(truth) > 2 * WINDOW, "the query must span several windows"
    got = ids(await page_through(windowed, query=query, **filters, limit=limit))
    assert len(got) == len(set(got))
    assert sorted(got) == sorted(truth)


async def test_windows_are_newest_first_and_each_is_ranked(windowed: Client, exact: Client, settings: Settings) -> None:
    """Both engines (FTS5 rank and ts_rank, each windowed in its own SQL): the windows
    follow the matches newest first (by key), and inside each window the exact order."""
    exact_order = ids(await page_through(exact, query="customer", limit=50))
    got = ids(await page_through(windowed, query="customer", limit=9))
    listed = ", ".join(f"'{i}'" for i in exact_order)
    newest_first = column(settings.database_url, f"SELECT id FROM tickets WHERE id IN ({listed}) ORDER BY pk DESC")
    assert sorted(newest_first) == sorted(exact_order)
    for start in range(0, len(newest_first), WINDOW):
        members = set(newest_first[start:start + WINDOW])
        # the window's tickets, in the order of the exact ranking
        assert got[start:start + WINDOW] == [i for i in exact_order if i in members]


async def test_a_ticket_added_between_pages_is_not_mixed_into_later_windows(windowed: Client, settings: Settings) -> None:
    """Both engines: a cursor holds its window's upper key, so a ticket added after the
    first page (the newest, and the best match) never appears in later pages."""
    first = await search(windowed, query="customer", limit=10)
    cursor = first.structured_content["next_cursor"]
    column(settings.database_url,
           "INSERT INTO tickets (id, subject, body, status, priority, owner, queue, customer, created_at, updated_at) "
           "VALUES ('SUP-9900001', 'customer customer customer', 'customer', 'open', 'normal', NULL, 'billing', "
           "'Acme', '2026-11-30 00:00:00', '2026-11-30 00:00:00') RETURNING id")
    rest: list[dict] = []
    while cursor:
        page = await search(windowed, query="customer", limit=10, cursor=cursor)
        assert page.is_error is False, text_of(page)
        rest += page.structured_content["tickets"]
        cursor = page.structured_content["next_cursor"]
    seen = ids(first.structured_content["tickets"]) + ids(rest)
    assert "SUP-9900001" not in seen and len(seen) == len(set(seen))
    again = await search(windowed, query="customer", limit=10)
    assert again.structured_content["tickets"][0]["id"] == "SUP-9900001"


def _forge(codec: CursorCodec, payload: dict) -> str:
    body = json.dumps(payload, separators=(",", ":")).encode()
    b64 = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode()  # noqa: E731
    return b64(body) + "." + b64(codec._tag(body))


@pytest.mark.parametrize(("payload", "ranked"), [
    ({"f": "abc", "k": 7, "r": -1.5}, True),  # made before ranking windows
    ({"f": "abc", "k": 7, "i": 0, "w": 2**63}, True),  # no database key is that large
    ({"f": "abc", "k": 7, "i": -1, "w": 9}, True),
    ({"f": "abc", "k": 7, "i": True, "w": 9}, True),
    ({"f": "abc", "k": 7, "i": 0, "w": "9"}, True),
    ({"f": "abc", "k": 7, "t": "2026-01-01T00:00:00+00:00"}, True),  # a listing cursor
    ({"f": "abc", "k": 7, "i": 0, "w": 9}, False),  # a ranked cursor on the listing
    ({"f": "abc", "k": 7, "t": "2026-01-01T00:00:00"}, False),  # no time zone
    ({"f": "abc", "k": -7, "t": "2026-01-01T00:00:00+00:00"}, False),
    (["abc", 7], False),
])
def test_signed_but_unusable_cursors_are_refused(payload: object, ranked: bool) -> None:
    """Even a correctly signed cursor (the key is derived from the database URL by
    default) must hold a position of the search's kind, in range, or be refused."""
    codec = CursorCodec(b"k" * 32)
    with pytest.raises(CursorError):
        codec.decode(_forge(codec, payload), "abc", ranked=ranked)  # type: ignore[arg-type]


async def test_a_cursor_from_another_window_size_is_refused(settings: Settings, windowed: Client) -> None:
    first = await search(windowed, query="customer", limit=5)
    cursor = first.structured_content["next_cursor"]
    assert cursor
    async with Client(build_server(settings.model_copy(update={"search_rank_window": WINDOW + 1}))) as other:
        result = await search(other, query="customer", limit=5, cursor=cursor)
    assert result.is_error and "without a cursor" in text_of(result)
