"""find_similar_tickets (issue 36, item 1): the sample's duplicate family found first,
scoped to the caller's queues, statuses filtered, each hit saying why it matched."""

from __future__ import annotations

import pytest
from fastmcp import Client, FastMCP

from tests.helpers import assert_text_mirrors_structured, create_caller, text_of
from ticket_server.server import build_server
from ticket_server.settings import Settings

EVERY_TOOLSET = {"toolsets": ["read", "respond", "triage", "related"]}
FAMILY = "Notifications still go to my old e-mail address"  # 43 tickets, 50 with Re:/Fwd:


@pytest.fixture
def server(settings: Settings) -> FastMCP:
    """The related toolset is not offered by default: these servers offer it."""
    return build_server(settings.model_copy(update=EVERY_TOOLSET))


async def test_the_duplicate_family_comes_first(client: Client) -> None:
    """Every one of the 40 best matches of a family member is of its family (the
    ticket itself left out), each hit's shared words are words of the query."""
    result = await client.call_tool("find_similar_tickets", {"ticket_id": " sup-1096", "limit": 40})
    assert_text_mirrors_structured(result)
    page = result.structured_content
    assert page["ticket"]["id"] == "SUP-1096"
    hits = page["tickets"]
    assert len(hits) == 40
    assert all(FAMILY in hit["subject"] for hit in hits), [h["subject"] for h in hits]
    assert "SUP-1096" not in {hit["id"] for hit in hits}
    assert {"old", "notifications", "address"} <= set(page["words"])
    for hit in hits:
        assert hit["shared_words"] and set(hit["shared_words"]) <= set(page["words"])
    assert "tickets[].subject" in page["untrusted_fields"]
    assert result.meta is not None and any("untrusted" in str(v) for v in result.meta.values())


async def test_status_filter_and_unknown_id(client: Client) -> None:
    result = await client.call_tool(
        "find_similar_tickets", {"ticket_id": "SUP-1096", "status": ["closed"], "limit": 20}
    )
    hits = result.structured_content["tickets"]
    assert hits and {hit["status"] for hit in hits} == {"closed"}
    missing = await client.call_tool(
        "find_similar_tickets", {"ticket_id": "SUP-0"}, raise_on_error=False
    )
    assert missing.is_error and "No ticket with id 'SUP-0'" in text_of(missing)


@pytest.mark.parametrize("mode", ["2026-07-28"])
async def test_a_caller_finds_only_tickets_of_its_queues(settings: Settings, mode: str) -> None:
    """A support-only caller: a billing ticket is unknown to it, and the tickets like a
    support ticket are support tickets, though other queues hold tickets like it."""
    await create_caller(settings.database_url, "support", queues=["support"])
    everyone = await _similar(
        build_server(settings.model_copy(update=EVERY_TOOLSET)), mode, "SUP-1200"
    )
    assert {hit["queue"] for hit in everyone} > {"support"}  # the scope has work to do
    support = build_server(settings.model_copy(update={"stdio_caller": "support", **EVERY_TOOLSET}))
    hits = await _similar(support, mode, "SUP-1200")
    assert hits and {hit["queue"] for hit in hits} == {"support"}
    async with Client(support, mode=mode) as c:
        hidden = await c.call_tool(
            "find_similar_tickets", {"ticket_id": "SUP-1013"}, raise_on_error=False
        )
    assert hidden.is_error and "No ticket with id 'SUP-1013'" in text_of(hidden)


async def _similar(server, mode: str, ticket_id: str) -> list[dict]:  # type: ignore[no-untyped-def]
    async with Client(server, mode=mode) as c:
        result = await c.call_tool("find_similar_tickets", {"ticket_id": ticket_id, "limit": 50})
    hits: list[dict] = result.structured_content["tickets"]
    return hits


async def test_the_rank_is_the_searchs_rank_for_its_words(client: Client) -> None:
    """Over the sample every holder of a query word is a candidate (each word's holders
    number fewer than ``PER_WORD``), so the tickets come in the order a relevance search
    for the same words gives them, the ticket itself left out."""
    for ticket_id in ["SUP-1096", "SUP-1200", "SUP-2001", "SUP-3333"]:
        similar = await client.call_tool(
            "find_similar_tickets", {"ticket_id": ticket_id, "limit": 20}
        )
        page = similar.structured_content
        assert page["words"]
        search = await client.call_tool(
            "search_tickets_v2", {"query": " ".join(page["words"]), "limit": 21}
        )
        hits = search.structured_content["tickets"]
        exact = [hit["id"] for hit in hits if hit["id"] != ticket_id]
        assert [hit["id"] for hit in page["tickets"]] == exact[:20], ticket_id
