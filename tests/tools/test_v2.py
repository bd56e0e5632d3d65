"""The current tools: get_ticket_status_v2 and search_tickets_v2 (ranking, filters, paging)."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime

import pytest
from fastmcp import Client

from tests.helpers import assert_no_leak, assert_text_mirrors_structured, scalar, text_of
from ticket_server import db
from ticket_server.admin.seeding import seed
from ticket_server.db import open_repository
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tools.tickets import MAX_PAGE_BYTES

STATUSES = ["new", "open", "in_progress", "waiting_on_customer", "resolved", "closed"]


async def search(client: Client, **arguments):
    return await client.call_tool("search_tickets_v2", arguments, raise_on_error=False)


async def page_through(client: Client, **arguments) -> list[dict]:
    seen: list[dict] = []
    cursor = None
    for _ in range(10_000):
        result = await search(client, **arguments, **({"cursor": cursor} if cursor else {}))
        assert result.is_error is False, text_of(result)
        seen += result.structured_content["tickets"]
        cursor = result.structured_content["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("paging did not end")


async def test_get_v2_record(client: Client) -> None:
    result = await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
    assert result.structured_content == {
        "id": "SUP-4412",
        "subject": "Invoice INV-20931 charged twice after plan upgrade",
        "status": "waiting_on_customer",
        "priority": "high",
        "owner": "r.mehta",
        "queue": "billing",
        "created_at": "2026-07-02T09:15:00Z",
        "updated_at": "2026-07-14T16:42:00Z",
    }
    assert_text_mirrors_structured(result)


async def test_get_v2_schema_has_enums_and_times(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    out = tools["get_ticket_status_v2"].output_schema
    assert out["properties"]["status"]["enum"] == STATUSES
    assert out["properties"]["priority"]["enum"] == ["low", "normal", "high", "urgent"]
    assert out["properties"]["updated_at"]["format"] == "date-time"
    search_in = tools["search_tickets_v2"].input_schema["properties"]
    assert search_in["limit"]["minimum"] == 1 and search_in["limit"]["maximum"] == 50
    assert "16 KiB" in tools["search_tickets_v2"].description


async def test_get_v2_unknown_id(client: Client) -> None:
    result = await client.call_tool(
        "get_ticket_status_v2", {"ticket_id": "SUP-0000000"}, raise_on_error=False
    )
    assert result.is_error and "SUP-0000000" in text_of(result)
    assert_no_leak(text_of(result))


async def test_search_ranks_subject_matches_first(client: Client) -> None:
    result = await search(client, query="charged twice")
    hits = result.structured_content["tickets"]
    assert hits
    assert all(
        set(h) == {"id", "subject", "status", "priority", "owner", "queue", "updated_at"}
        for h in hits
    )
    assert "charged twice" in hits[0]["subject"].lower()
    assert_text_mirrors_structured(result)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "*",
        "-",
        "invoice*",
        "-refund",
        "AND",
        "OR",
        "NOT",
        "NEAR(",
        "NEAR(a b)",
        "(",
        ")",
        "a AND (b OR",
        "subject:invoice",
        "^invoice",
        "{x}",
        "'; DROP TABLE tickets; --",
        "\\",
        "%",
        "_",
        ":",
        "+",
        "refund -card",
        "é" * 600,
    ],
)
async def test_search_query_syntax_is_plain_text(client: Client, query: str) -> None:
    """FTS5 / tsquery / LIKE syntax in a query is text: the query finds exactly what its
    words alone find (same tickets, same order), so `refund -card` is not a negation,
    `invoice*` not a prefix, `%` not a wildcard, and a query with no words finds what an
    empty one does."""
    query = query[:500]
    result = await search(client, query=query, limit=50)
    assert result.is_error is False, text_of(result)
    words = " ".join(re.findall(r"\w+", query))
    plain = await search(client, query=words, limit=50)
    assert plain.is_error is False, text_of(plain)
    assert [t["id"] for t in result.structured_content["tickets"]] == [
        t["id"] for t in plain.structured_content["tickets"]
    ]


async def test_search_folds_accents_and_case(client: Client) -> None:
    """`cafe` finds `café` (C02's subject), `CAFE` too, and `naive` finds `naïve`."""
    for query in ("cafe", "CAFE", "café", "naive"):
        ids = {t["id"] for t in await page_through(client, query=query, limit=50)}
        assert "SUP-1042" in ids, query


async def test_search_filters(client: Client) -> None:
    hits = await page_through(
        client, query="", status=["waiting_on_customer", "new"], queue="billing", limit=50
    )
    assert hits
    assert all(
        h["status"] in ("waiting_on_customer", "new") and h["queue"] == "billing" for h in hits
    )
    owned = await page_through(client, owner="r.mehta", limit=50)
    assert owned and all(h["owner"] == "r.mehta" for h in owned)
    recent = await page_through(client, updated_after="2026-11-01T00:00:00Z", limit=50)
    assert recent and all(h["updated_at"] > "2026-11-01T00:00:00Z" for h in recent)


async def test_empty_query_lists_newest_first(client: Client) -> None:
    hits = await page_through(client, queue="security", limit=50)
    stamps = [h["updated_at"] for h in hits]
    assert stamps == sorted(stamps, reverse=True)


async def test_bad_filters_are_explained(client: Client) -> None:
    bad_status = await search(client, status=["pending"])
    assert (
        bad_status.is_error
        and "status" in text_of(bad_status)
        and "waiting_on_customer" in text_of(bad_status)
    )
    naive = await search(client, updated_after="2026-07-01T00:00:00")
    assert naive.is_error and "updated_after" in text_of(naive)
    for limit in (0, 51, "10"):
        result = await search(client, query="invoice", limit=limit)
        assert result.is_error and "1 to 50" in text_of(result)


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "invoice"},
        {"query": ""},
        {"query": "", "status": ["closed"]},
        {"query": "refund card"},
    ],
)
async def test_paging_returns_every_match_exactly_once(client: Client, arguments: dict) -> None:
    everything = await page_through(client, **arguments, limit=50)
    small = await page_through(client, **arguments, limit=7)
    ids = [t["id"] for t in small]
    assert len(ids) == len(set(ids)), "pages overlap"
    assert sorted(ids) == sorted(t["id"] for t in everything), "pages skip"
    assert ids == [t["id"] for t in everything], "page order is stable"


async def test_tampered_and_foreign_cursors_are_errors(client: Client) -> None:
    first = await search(client, query="invoice", limit=2)
    cursor = first.structured_content["next_cursor"]
    assert cursor
    middle = len(cursor) // 2
    flipped = cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1 :]
    for bad in (flipped, cursor + "x", cursor[:-4], "garbage", "a.b.c", "é", ""):
        result = await search(client, query="invoice", limit=2, cursor=bad)
        if bad == "":
            assert result.is_error is False  # empty cursor means first page
            continue
        assert result.is_error, bad
        assert "without a cursor" in text_of(result)
        assert_no_leak(text_of(result))
    other = await search(client, query="refund", limit=2, cursor=cursor)
    assert other.is_error and "other query or filters" in text_of(other)


async def test_page_json_stays_under_bound(client: Client, settings: Settings) -> None:
    now = datetime(2026, 11, 20, tzinfo=UTC)
    repo = open_repository(settings)
    await repo.add_all(
        [
            {
                "id": f"SUP-95{i:05d}",
                "subject": "zebrafish " + "ü" * 280,
                "body": "zebrafish",
                "status": "open",
                "priority": "low",
                "owner": None,
                "queue": "support",
                "customer": "Big Subjects",
                "created_at": now,
                "updated_at": now,
            }
            for i in range(60)
        ]
    )
    await repo.aclose()
    result = await search(client, query="zebrafish", limit=50)
    page = result.structured_content
    assert len(json.dumps(page, ensure_ascii=False).encode()) <= MAX_PAGE_BYTES
    assert 0 < len(page["tickets"]) < 50 and page["next_cursor"]
    everything = await page_through(client, query="zebrafish", limit=50)
    assert len({t["id"] for t in everything}) == 60


# The number of tickets matching "refund", as each engine's own index counts it.
REFUND_MATCHES = {
    "sqlite": "SELECT count(*) FROM tickets_fts WHERE tickets_fts MATCH '\"refund\"'",
    "postgresql": "SELECT count(*) FROM tickets WHERE search_vector @@ to_tsquery('simple', 'refund')",
}


def test_search_over_5000_generated_tickets(empty_database_url: str, backend: str) -> None:
    """5,000 generated tickets, both engines (each pages through its own index: FTS5
    rowids, tsvector ranks): every "refund" match comes back exactly once, as many as
    the engine's index holds, and a filtered listing returns the whole billing/open set."""
    url = empty_database_url
    db.upgrade(url)
    settings = Settings(database_url=url)
    assert asyncio.run(seed(settings, count=5_000)) == 5_000

    async def check() -> None:
        async with Client(build_server(settings)) as client:
            hits = await page_through(client, query="refund", limit=50)
            ids = [h["id"] for h in hits]
            assert len(ids) == len(set(ids)) > 50
            assert len(ids) == int(scalar(url, REFUND_MATCHES[backend]))
            billing = await page_through(
                client, query="", queue="billing", status=["open"], limit=50
            )
            assert len(billing) == int(
                scalar(url, "SELECT count(*) FROM tickets WHERE queue='billing' AND status='open'")
            )

    asyncio.run(check())


async def test_c02_subject_fetched_and_found_character_for_character(client: Client) -> None:
    """C02 for the current reads: SUP-1042's subject `テスト – café ✓ naïve`, fetched by
    id (get_ticket_status_v2, get_ticket) and found by `café` (both kinds of search), comes
    back character for character in structuredContent and in the text, without \\u escapes."""
    subject = "テスト – café ✓ naïve"
    calls = [
        ("get_ticket_status_v2", {"ticket_id": "SUP-1042"}, lambda s: s["subject"]),
        (
            "get_ticket",
            {"ticket_id": "SUP-1042", "fields": ["subject"]},
            lambda s: s["subject"]["text"],
        ),
    ] + [
        (
            "search_tickets_v2",
            {"query": "café", "limit": 50, **kind},
            lambda s: next(t["subject"] for t in s["tickets"] if t["id"] == "SUP-1042"),
        )
        for kind in ({}, {"search_in": "conversation"})
    ]
    for name, arguments, subject_of in calls:
        result = await client.call_tool(name, arguments)
        assert subject_of(result.structured_content) == subject, name
        assert subject in text_of(result) and "\\u" not in text_of(result), name


async def test_a_cursor_does_not_show_its_position(client: Client) -> None:
    """A cursor is encrypted: its position holds the last hit's rank, whose word weights
    count the tickets of every queue, which a caller limited to queues must not read."""
    import base64

    cursor = (await search(client, query="refund", limit=1)).structured_content["next_cursor"]
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    assert b'{"f":' not in raw and b'"r":' not in raw and b'"k":' not in raw
    assert (await search(client, query="refund", limit=1)).structured_content[
        "next_cursor"
    ] == cursor
    assert (await search(client, query="refund", limit=1, cursor=cursor)).is_error is False
