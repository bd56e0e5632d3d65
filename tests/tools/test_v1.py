"""The original tools through the in-memory client, in both protocol revisions."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fastmcp import Client

from tests.helpers import assert_no_leak, assert_text_mirrors_structured, text_of
from ticket_server import __version__
from ticket_server.db import open_repository


@pytest.mark.parametrize(("mode", "revision"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_server_identity_in_both_revisions(server, mode: str, revision: str) -> None:
    """`auto` runs server/discover (2026-07-28); `legacy` runs the initialize handshake."""
    async with Client(server, mode=mode) as c:
        assert c.protocol_version == revision
        assert c.server_info.name == "ticket-server"
        assert c.server_info.version == __version__
        assert "ticket" in (c.instructions or "")
        assert "SUP-4412" in (c.instructions or "")


async def test_lists_both_original_tools_read_only(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert {"get_ticket_status", "search_tickets"} <= set(tools)
    for name in ("get_ticket_status", "search_tickets"):
        tool = tools[name]
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.output_schema is not None
        assert tool.description and len(tool.description) > 80
    assert tools["get_ticket_status"].input_schema["required"] == ["ticket_id"]
    limit = tools["search_tickets"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 50, 5)


async def test_get_ticket_status_sup_4412(client: Client) -> None:
    result = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
    assert result.is_error is False
    assert result.structured_content == {
        "id": "SUP-4412",
        "status": "waiting_on_customer",
        "owner": "r.mehta",
        "updated": "2026-07-14",
    }
    assert_text_mirrors_structured(result)


async def test_get_ticket_status_accepts_loose_id_spelling(client: Client) -> None:
    result = await client.call_tool("get_ticket_status", {"ticket_id": "  sup-4412 "})
    assert result.structured_content["id"] == "SUP-4412"


async def test_c01_unknown_id_is_error_naming_id(client: Client) -> None:
    """C01: an unknown id is an isError result naming the id, with no internals."""
    result = await client.call_tool(
        "get_ticket_status", {"ticket_id": "SUP-0000000"}, raise_on_error=False
    )
    assert result.is_error is True
    text = text_of(result)
    assert "SUP-0000000" in text
    assert_no_leak(text)


async def test_get_ticket_status_huge_id_is_not_found(client: Client) -> None:
    result = await client.call_tool(
        "get_ticket_status", {"ticket_id": "X" * 100_000}, raise_on_error=False
    )
    assert result.is_error is True
    assert len(text_of(result)) < 500


async def test_c02_non_ascii_subject_round_trips(client: Client, settings) -> None:
    """C02: the subject comes back character for character, with no \\u escapes in the text."""
    subject = "テスト – café ✓ naïve"
    repo = open_repository(settings)
    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    await repo.add_all(
        [
            {
                "id": "SUP-9000001",
                "subject": subject,
                "body": "Unicode round trip.",
                "status": "open",
                "priority": "normal",
                "owner": None,
                "queue": "support",
                "customer": "Zürich AG",
                "created_at": now,
                "updated_at": now,
            }
        ]
    )
    await repo.aclose()
    result = await client.call_tool("search_tickets", {"query": "café", "limit": 50})
    hits = {t["id"]: t for t in result.structured_content["result"]}
    assert hits["SUP-9000001"]["subject"] == subject
    text = text_of(result)
    assert subject in text and "\\u" not in text
    status = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-9000001"})
    assert status.structured_content["owner"] is None


async def test_search_is_case_insensitive_substring_of_subject(client: Client) -> None:
    result = await client.call_tool("search_tickets", {"query": "INVOICE", "limit": 50})
    hits = result.structured_content["result"]
    assert hits, "the sample has invoice tickets"
    assert all("invoice" in h["subject"].lower() for h in hits)
    assert set(hits[0]) == {"id", "subject", "status"}
    assert_text_mirrors_structured(result)


async def test_search_case_folding_covers_non_ascii(client: Client) -> None:
    for query in ("CAFÉ ✓ NAÏVE", "テスト – café"):
        result = await client.call_tool("search_tickets", {"query": query, "limit": 50})
        assert "SUP-1042" in {h["id"] for h in result.structured_content["result"]}, query


async def test_search_default_limit_is_5(client: Client) -> None:
    result = await client.call_tool("search_tickets", {"query": "e"})
    assert len(result.structured_content["result"]) == 5


async def test_search_no_match_is_empty_list(client: Client) -> None:
    result = await client.call_tool("search_tickets", {"query": "zzqxj-nothing-like-this"})
    assert result.is_error is False
    assert result.structured_content == {"result": []}


async def test_c03_percent_and_underscore_are_literal(client: Client, settings) -> None:
    """C03: % and _ match themselves only; a subject a-b is not returned for a_b."""
    now = datetime(2026, 11, 2, tzinfo=UTC)
    base = {
        "body": "x",
        "status": "new",
        "priority": "low",
        "owner": None,
        "queue": "support",
        "customer": "C03 Ltd",
        "created_at": now,
        "updated_at": now,
    }
    repo = open_repository(settings)
    await repo.add_all(
        [
            {**base, "id": "SUP-9100001", "subject": "Coupon gives 100% off"},
            {**base, "id": "SUP-9100002", "subject": "Coupon gives 1000 off"},
            {**base, "id": "SUP-9100003", "subject": "field a_b missing"},
            {**base, "id": "SUP-9100004", "subject": "field a-b missing"},
            {**base, "id": "SUP-9100005", "subject": "field aXb missing"},
        ]
    )
    await repo.aclose()
    pct = await client.call_tool("search_tickets", {"query": "100%", "limit": 50})
    ids = {h["id"] for h in pct.structured_content["result"]}
    assert "SUP-9100001" in ids and "SUP-9100002" not in ids
    assert all("100%" in h["subject"] for h in pct.structured_content["result"])
    und = await client.call_tool("search_tickets", {"query": "a_b", "limit": 50})
    ids = {h["id"] for h in und.structured_content["result"]}
    assert "SUP-9100003" in ids
    assert not ids & {"SUP-9100004", "SUP-9100005"}


@pytest.mark.parametrize("limit", [1_000_000_000, -1, 0, 51, "5", 2.5, None, True])
async def test_c07_bad_limit_is_error_naming_bound(client: Client, limit) -> None:
    """C07: an out-of-range or wrong-typed limit is an isError naming the bound."""
    result = await client.call_tool(
        "search_tickets", {"query": "invoice", "limit": limit}, raise_on_error=False
    )
    assert result.is_error is True
    text = text_of(result)
    assert "limit" in text and "1" in text and "50" in text, text
    assert "errors.pydantic.dev" not in text
    assert_no_leak(text)


async def test_missing_and_unknown_arguments_are_explained(client: Client) -> None:
    missing = await client.call_tool("search_tickets", {}, raise_on_error=False)
    assert missing.is_error and "'query' is required" in text_of(missing)
    extra = await client.call_tool(
        "get_ticket_status", {"ticket_id": "SUP-4412", "verbose": True}, raise_on_error=False
    )
    assert extra.is_error and "'verbose' is not an argument" in text_of(extra)


async def test_results_are_json_text_for_older_clients(client: Client) -> None:
    result = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
    assert json.loads(text_of(result))["status"] == "waiting_on_customer"
