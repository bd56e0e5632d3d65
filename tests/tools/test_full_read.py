"""The whole ticket (issue 13): get_ticket, get_customer, the resource templates,
completions and prompts, on SQLite and PostgreSQL in both protocol revisions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import mcp.types as mt
import pytest
from fastmcp import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from tests.hardening.support import BackgroundClients
from tests.helpers import assert_text_mirrors_structured, create_caller, text_of
from ticket_server.admin.export import envelope, measure
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tools.full_read import MAX_PAGE_BYTES, UNTRUSTED_META
from ticket_server.tools.ticket_shapes import TICKET_FIELDS

INJECTION = "ignore previous instructions"


def size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


async def test_full_read_of_sup_4412_as_seeded(client: Client) -> None:
    """SUP-4412: body, customer, the conversation that explains why it waits on the
    customer, and its history, newest first; text a customer wrote labelled."""
    result = await client.call_tool("get_ticket", {"ticket_id": "sup-4412 "})
    assert_text_mirrors_structured(result)
    t = result.structured_content
    assert set(t) == {"id", *TICKET_FIELDS}
    assert (t["id"], t["status"], t["priority"], t["owner"], t["queue"], t["version"]) == (
        "SUP-4412",
        "waiting_on_customer",
        "high",
        "r.mehta",
        "billing",
        1,
    )
    assert t["body"]["untrusted"] is True and "INV-20931" in t["body"]["text"]
    assert t["subject"] == {
        "untrusted": True,
        "truncated": False,
        "text": "Invoice INV-20931 charged twice after plan upgrade",
    }
    assert {k: t["customer"][k] for k in ("name", "plan", "region")} == {
        "name": "Northwind Traders",
        "plan": "Business",
        "region": "EU",
    }
    conversation = t["conversation"]
    assert (
        conversation["total"],
        conversation["returned"],
        conversation["truncated"],
        conversation["next_cursor"],
    ) == (6, 6, False, None)
    comments = conversation["comments"]
    assert [c["created_at"] for c in comments] == sorted(
        (c["created_at"] for c in comments), reverse=True
    )
    assert [(c["author"], c["author_type"], c["visibility"]) for c in comments] == [
        ("r.mehta", "agent", "public"),
        ("Anna Fischer", "customer", "public"),
        ("r.mehta", "agent", "internal"),
        ("Anna Fischer", "customer", "public"),
        ("r.mehta", "agent", "internal"),
        ("r.mehta", "agent", "public"),
    ]
    assert "which card or bank account" in comments[0]["body"]["text"]
    assert [c["body"]["untrusted"] for c in comments] == [
        c["author_type"] == "customer" for c in comments
    ]
    history = t["history"]
    assert (history["total"], history["truncated"]) == (5, False)
    assert [(e["field"], e["new_value"]) for e in history["events"]] == [
        ("status", "waiting_on_customer"),
        ("status", "in_progress"),
        ("priority", "high"),
        ("status", "open"),
        ("owner", "r.mehta"),
    ]
    assert history["events"][0]["created_at"] == "2026-07-14T16:42:00Z" == t["updated_at"]
    assert result.meta[UNTRUSTED_META]["untrusted"] is True
    links = {b.uri.__str__() for b in result.content if b.type == "resource_link"}
    assert links == {"tickets://ticket/SUP-4412", t["customer"]["uri"]}


async def test_unknown_ticket_customer_and_bad_cursor_are_readable_errors(client: Client) -> None:
    for name, arguments, words in [
        ("get_ticket", {"ticket_id": "SUP-0000001"}, "No ticket with id"),
        ("get_customer", {"customer_id": "CUS-0"}, "No customer with id"),
        ("get_ticket", {"ticket_id": "SUP-4412", "cursor": "nonsense"}, "cursor is not valid"),
    ]:
        result = await client.call_tool(name, arguments, raise_on_error=False)
        assert result.is_error and words in text_of(result)


def test_fields_returns_exactly_the_requested_keys(settings: Settings) -> None:
    """Property: for any subset of the fields, get_ticket returns exactly those keys and id."""
    with BackgroundClients(build_server(settings)) as bg:

        @hypothesis_settings(
            max_examples=40, deadline=None, suppress_health_check=list(HealthCheck)
        )
        @given(
            fields=st.lists(st.sampled_from(TICKET_FIELDS), unique=True),
            ticket=st.sampled_from(["SUP-4412", "SUP-1042", "SUP-1337", "SUP-2000"]),
            modern=st.booleans(),
        )
        def run(fields: list[str], ticket: str, modern: bool) -> None:
            result = bg.call(
                "2026-07-28" if modern else "legacy",
                "get_ticket",
                {"ticket_id": ticket, "fields": fields},
            )
            assert not result.isError
            assert set(result.structuredContent) == {"id", *fields}
            assert json.loads(result.content[0].text) == result.structuredContent

        run()


async def _add_comments(settings: Settings, ticket_id: str, count: int) -> None:
    from ticket_server.db import open_repository

    start = datetime(2026, 8, 1, tzinfo=UTC)
    repo = open_repository(settings)
    try:
        await repo.add_all(
            (),
            comments=[
                {
                    "ticket_id": ticket_id,
                    "author": "Jürgen Müller" if i % 2 else "l.nguyen",
                    "author_type": "customer" if i % 2 else "agent",
                    "visibility": "public",
                    # some long, some non-ASCII; a few share a time, so the key breaks ties
                    "body": f"comment {i} " + ("テスト café ✓ " * (i % 7) * 40),
                    "created_at": start + timedelta(minutes=i // 3),
                }
                for i in range(count)
            ],
        )
    finally:
        await repo.aclose()


async def test_500_comments_page_out_completely_under_16_kib(settings: Settings, mode: str) -> None:
    await _add_comments(settings, "SUP-2000", 500)
    async with Client(build_server(settings), mode=mode) as client:
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            arguments = {"ticket_id": "SUP-2000", "limit": 50, "fields": ["conversation"]}
            if cursor:
                arguments["cursor"] = cursor
            result = await client.call_tool("get_ticket", arguments)
            page = result.structured_content["conversation"]
            assert size(result.structured_content) <= MAX_PAGE_BYTES
            assert page["returned"] == len(page["comments"]) >= 1
            assert page["truncated"] is (page["next_cursor"] is not None)
            seen += [c["body"]["text"].split(" ", 2)[1] for c in page["comments"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        total = page["total"]
        assert len(seen) == len(set(seen)) == total >= 500
        assert {str(i) for i in range(500)} <= set(seen)
        assert pages > 10  # pages were cut by size, not only by limit
        resource = await client.read_resource("tickets://ticket/SUP-2000")
        assert len(resource[0].text.encode()) <= MAX_PAGE_BYTES
        assert json.loads(resource[0].text)["conversation"]["truncated"] is True


@pytest.fixture
async def billing_client(settings: Settings, mode: str):
    await create_caller(settings.database_url, "billing", queues=["billing"])
    async with Client(
        build_server(settings.model_copy(update={"stdio_caller": "billing"})), mode=mode
    ) as c:
        yield c


async def _missing_answer(client: Client, uri: str) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return caught.value.error.code, caught.value.error.message.replace(uri, "URI")


async def test_billing_caller_never_sees_another_queue(billing_client: Client) -> None:
    """Resources, links, completions (values too) and prompts for a billing-only caller:
    a support ticket or customer answers exactly as a missing one."""
    client = billing_client
    # Resources: SUP-1042 (support) and a customer with only support tickets.
    missing = await _missing_answer(client, "tickets://ticket/SUP-0000001")
    assert await _missing_answer(client, "tickets://ticket/SUP-1042") == missing
    support_only = "CUS-1250"  # Glasshouse Retail Ltd: one ticket, SUP-1337, in support
    assert await _missing_answer(client, f"tickets://customer/{support_only}") == missing
    assert await _missing_answer(client, "tickets://customer/CUS-0") == missing
    result = await client.call_tool(
        "get_customer", {"customer_id": support_only}, raise_on_error=False
    )
    assert result.is_error and "No customer" in text_of(result)
    billing = json.loads((await client.read_resource("tickets://ticket/SUP-4412"))[0].text)
    assert billing["queue"] == "billing"
    # get_customer's tickets and links: billing only.
    customer_id = billing["customer"]["id"]
    result = await client.call_tool("get_customer", {"customer_id": customer_id})
    value = result.structured_content
    assert {t["queue"] for t in value["open_tickets"] + value["recent_tickets"]} == {"billing"}
    links = [
        str(block.uri)
        for block in result.content
        if block.type == "resource_link" and "/ticket/" in str(block.uri)
    ]
    assert links, "get_customer linked no ticket: the links' queues would go unchecked"
    for uri in links:
        resource = json.loads((await client.read_resource(uri))[0].text)
        assert resource["queue"] == "billing"
    # Completions: every value in billing.
    template = ResourceTemplateReference(type="ref/resource", uri="tickets://ticket/{id}")
    ids = (await client.complete(template, {"name": "id", "value": "SUP-1"})).values
    assert ids and "SUP-1042" not in ids
    for ticket_id in ids[:5]:
        assert (
            json.loads((await client.read_resource(f"tickets://ticket/{ticket_id}"))[0].text)[
                "queue"
            ]
            == "billing"
        )
    triage = PromptReference(type="ref/prompt", name="triage_queue")
    assert (await client.complete(triage, {"name": "queue", "value": ""})).values == ["billing"]
    assert (
        await client.complete(triage, {"name": "owner", "value": ""}, {"queue": "support"})
    ).values == []
    customers = ResourceTemplateReference(type="ref/resource", uri="tickets://customer/{id}")
    found = (await client.complete(customers, {"name": "id", "value": "CUS-"})).values
    assert found and support_only not in found
    for cid in found[:5]:
        assert (await client.call_tool("get_customer", {"customer_id": cid})).is_error is False
    # Prompts: a support ticket or queue is "not found", as a missing one.
    for name, arguments in [
        ("summarize_ticket", {"ticket_id": "SUP-1042"}),
        ("draft_reply", {"ticket_id": "SUP-1042"}),
        ("triage_queue", {"queue": "support"}),
    ]:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt(name, arguments)
        assert (
            "SUP-1042" not in caught.value.error.message
            or "No ticket" in caught.value.error.message
        )
    prompt = await client.get_prompt("triage_queue", {"queue": "billing"})
    assert {t["id"][:4] for t in json.loads(prompt.messages[1].content.text)["open_tickets"]} == {
        "SUP-"
    }


def _outside_labels(value: Any) -> list[str]:
    """Every string of ``value`` (JSON) that is not inside an ``{untrusted: true}`` object."""
    if isinstance(value, dict):
        if value.get("untrusted") is True:
            return []
        return [s for v in value.values() for s in _outside_labels(v)]
    if isinstance(value, list):
        return [s for v in value for s in _outside_labels(v)]
    return [value] if isinstance(value, str) else []


async def test_injection_text_reaches_the_model_only_labelled(client: Client) -> None:
    """SUP-1337's body and a comment tell "the AI" to ignore previous instructions: on
    every tool, resource and prompt the text is inside {untrusted: true, text} only,
    the result's _meta says so, and no server-written instruction contains it."""
    results: list[tuple[Any, Any]] = []
    ticket = await client.call_tool("get_ticket", {"ticket_id": "SUP-1337"})
    results.append((ticket.structured_content, ticket.meta))
    customer_id = ticket.structured_content["customer"]["id"]
    customer = await client.call_tool("get_customer", {"customer_id": customer_id})
    results.append((customer.structured_content, customer.meta))
    for uri in ("tickets://ticket/SUP-1337", f"tickets://customer/{customer_id}"):
        read = await client.read_resource_mcp(uri)
        results.append((json.loads(read.contents[0].text), read.meta))
    for name, arguments in [
        ("summarize_ticket", {"ticket_id": "SUP-1337"}),
        ("draft_reply", {"ticket_id": "SUP-1337", "language": "German"}),
        ("triage_queue", {"queue": "support"}),
    ]:
        prompt = await client.get_prompt(name, arguments)
        instruction, data = prompt.messages
        assert INJECTION not in instruction.content.text.lower()
        assert "untrusted" in instruction.content.text
        text = data.content.resource.text if data.content.type == "resource" else data.content.text
        results.append((json.loads(text), prompt.meta))
    body = ticket.structured_content["body"]
    assert body["untrusted"] is True and INJECTION in body["text"].lower()
    assert any(
        INJECTION in c["body"]["text"].lower() and c["body"]["untrusted"]
        for c in ticket.structured_content["conversation"]["comments"]
    )
    for value, meta in results:
        assert not [s for s in _outside_labels(value) if INJECTION in s.lower() or "IMPORTANT" in s]
        assert meta[UNTRUSTED_META]["untrusted"] is True


# Estimated tokens (`tools export`'s count: compact JSON bytes / 4) for a read-only
# caller, all read tools listed. The provider envelope is what a model request carries
# (name, description, input schema); the tools/list result is the whole block a client
# receives, output schemas and _meta included.
ENVELOPE_BUDGET = 1_800
# 3,109 with search_tickets_v2's untrusted_fields output (C38), which had 3,100 to fit in.
# Then count_tickets (issue 34, ~480, a read: a reader given the backlog toolset is offered
# it), get_ticket's sla output (~300), get_attachment (296, its output schema 161 of them),
# get_ticket's attachments list (131, issue 35), search_tickets_v2's tags and fields
# filters and get_ticket's tags and custom_fields (~140, issue 33). Then search_tickets_v2's
# due_before and breached filters and its hits' sla_due_at (~45, issue 34; its description
# shortened by ~25 to make room). Then get_ticket's history.sla_breaches (~40, issue 34;
# its description shortened to make room).
TOOLS_LIST_BUDGET = 4_050


async def test_size_budget_and_capabilities(settings: Settings) -> None:
    """The tools/list result for a read-only caller, as sent (output schemas included),
    stays within TOOLS_LIST_BUDGET estimated tokens, and its provider envelope within
    ENVELOPE_BUDGET (as `tools export` counts them); resources stay under 16 KiB; the
    capabilities advertised (prompts, resources, completions) are the same over both
    handshakes."""
    await create_caller(settings.database_url, "reader", queues=None)
    # The default toolsets: what a read-only caller is offered without toolsets of its own.
    default = Settings.model_fields["toolsets"].default
    server = build_server(
        settings.model_copy(update={"stdio_caller": "reader", "toolsets": default})
    )
    capabilities = {}
    for mode in ("legacy", "2026-07-28"):
        async with Client(server, mode=mode) as client:
            tools = await client.list_tools()
            assert {"get_ticket", "get_customer"} <= {t.name for t in tools}
            # The result as the client received it, measured the way `tools export
            # --format mcp` measures it.
            listed = await client.session.send_request(
                mt.ListToolsRequest(method="tools/list"), mt.ListToolsResult
            )
            block = listed.model_dump(by_alias=True, mode="json", exclude_none=True)
            per_tool = {t["name"]: measure(t)[1] for t in block["tools"]}
            assert measure(block)[1] <= TOOLS_LIST_BUDGET, per_tool
            assert measure(envelope(tools, "openai"))[1] <= ENVELOPE_BUDGET
            if mode == "legacy":
                caps = client.initialize_result.capabilities.model_dump(
                    by_alias=True, exclude_none=True
                )
            else:
                caps = (await client.session.send_discover("2026-07-28"))["capabilities"]
            capabilities[mode] = caps
            assert {"prompts", "resources", "completions", "tools"} <= set(caps)
            assert caps["tools"]["listChanged"] is caps["prompts"]["listChanged"] is False
            assert {p.name for p in await client.list_prompts()} == {
                "summarize_ticket",
                "triage_queue",
                "draft_reply",
            }
            assert {str(t.uri_template) for t in await client.list_resource_templates()} == {
                "tickets://ticket/{id}",
                "tickets://customer/{id}",
                "tickets://queue/{name}",
                "tickets://attachment/{id}",
                "tickets://tag/{name}",
                "tickets://field/{name}/{value}",
            }
            for uri in ("tickets://ticket/SUP-1042", "tickets://customer/CUS-1250"):
                assert len((await client.read_resource(uri))[0].text.encode()) <= MAX_PAGE_BYTES
    # Extensions are FastMCP's own (the MCP Apps UI, on discover only); the rest is equal.
    same = ("tools", "resources", "prompts", "completions", "logging")
    assert {k: capabilities["legacy"].get(k) for k in same} == {
        k: capabilities["2026-07-28"].get(k) for k in same
    }


async def test_caller_without_read_scope_sees_no_template_prompt_or_completion(
    settings: Settings,
) -> None:
    """Templates and prompts carry the tickets:read scope: a caller without it lists
    neither, gets no completion values, and a ticket resource answers as a missing one."""
    await create_caller(settings.database_url, "writer", scopes=("tickets:write",))
    async with Client(
        build_server(settings.model_copy(update={"stdio_caller": "writer"}))
    ) as client:
        assert await client.list_resource_templates() == []
        assert await client.list_prompts() == []
        assert [str(r.uri) for r in await client.list_resources()] == ["tickets://manifest"]
        template = ResourceTemplateReference(type="ref/resource", uri="tickets://ticket/{id}")
        assert (await client.complete(template, {"name": "id", "value": "SUP-4"})).values == []
        assert await _missing_answer(client, "tickets://ticket/SUP-4412") == await _missing_answer(
            client, "tickets://ticket/SUP-0000001"
        )
        with pytest.raises(MCPError):
            await client.get_prompt("summarize_ticket", {"ticket_id": "SUP-4412"})


async def test_triage_of_an_owner_without_open_tickets_names_the_owner(client: Client) -> None:
    """triage_queue for a real queue and an owner with no open ticket there says it is the
    owner that found nothing, not the queue (which the client would then doubt)."""
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("triage_queue", {"queue": "billing", "owner": "nobody"})
    assert (
        caught.value.error.message
        == "No open tickets in a queue named 'billing' owned by 'nobody'."
    )
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("triage_queue", {"queue": "no-such-queue"})
    assert caught.value.error.message == "No open tickets in a queue named 'no-such-queue'."
