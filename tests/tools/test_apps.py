"""MCP Apps (issue 38) in memory: the extension is seen only by a client that negotiates
it (in both revisions), the views are self-contained with a strict CSP, the card's
actions are exactly what the caller's scopes, toolsets and queues admit, and the board
counts what the database holds (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastmcp import Client

from tests.access.conftest import add_caller, server_as  # noqa: F401  (fixtures)
from tests.helpers import call_any
from tests.tools.apps.browser import apps_extension
from tests.tools.test_writes import AGENT_SCOPES, _sql
from ticket_server.admin import contract
from ticket_server.settings import Settings
from ticket_server.tools.apps import APP_META, BOARD_TOOL, BOARD_URI, CARD_URI

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("name", "description", "inputSchema", "outputSchema", "annotations")


async def test_a_client_without_the_extension_sees_the_published_tools_unchanged(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """Every tool a caller with every scope is listed is exactly its entry in
    tool-contract.json's `tools` (no _meta.ui, no app-only tool), no ui:// resource is
    listed, get_ticket's result carries no app _meta, and the app-only tool answers
    exactly as an unknown tool does."""
    await add_caller("agent", scopes=AGENT_SCOPES)
    published = {t["name"]: t for t in contract.read_contract(ROOT / "tool-contract.json")["tools"]}
    async with Client(server_as(stdio_caller="agent"), mode=mode) as client:
        tools = await client.list_tools()
        listed = {
            t.name: {
                k: v
                for k, v in t.model_dump(by_alias=True, exclude_none=True, mode="json").items()
                if k in KEYS
            }
            for t in tools
        }
        assert listed == {name: published[name] for name in listed}
        assert set(listed) == set(published) and all(not (t.meta or {}).get("ui") for t in tools)
        assert not [r for r in await client.list_resources() if str(r.uri).startswith("ui://")]
        result = await client.call_tool("get_ticket", {"ticket_id": "SUP-4412"})
        assert APP_META not in (result.meta or {})
        failed, refused = await call_any(client, BOARD_TOOL, {"queue": "billing"})
        _, unknown = await call_any(client, "no_such_tool", {})
        assert failed and refused.replace(BOARD_TOOL, "X") == unknown.replace("no_such_tool", "X")


async def test_a_client_with_the_extension_gets_the_views(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """get_ticket names the card, get_queue_board is app-only and names the board; each
    view is text/html;profile=mcp-app, under 100 KB, fetches nothing (no URL, no src or
    href attribute), and declares a CSP without any origin."""
    await add_caller("agent", scopes=AGENT_SCOPES)
    async with Client(
        server_as(stdio_caller="agent"), mode=mode, extensions=[apps_extension()]
    ) as client:
        ui = {t.name: (t.meta or {}).get("ui") for t in await client.list_tools()}
        assert ui["get_ticket"] == {"resourceUri": CARD_URI}
        assert ui[BOARD_TOOL] == {"resourceUri": BOARD_URI, "visibility": ["app"]}
        assert {k: v for k, v in ui.items() if v} == {k: ui[k] for k in ("get_ticket", BOARD_TOOL)}
        listed = {str(r.uri): r for r in await client.list_resources()}
        for uri in (CARD_URI, BOARD_URI):
            assert listed[uri].mime_type == "text/html;profile=mcp-app"
            (content,) = await client.read_resource(uri)
            html = content.text  # type: ignore[union-attr]
            assert content.mime_type == "text/html;profile=mcp-app"
            assert len(html.encode()) < 100_000
            assert not re.search(r"https?://|\b(src|href)\s*=", html, re.IGNORECASE)
            assert ".innerHTML" not in html and "insertAdjacentHTML" not in html
            assert content.meta == {
                "ui": {
                    "csp": {
                        "connectDomains": [],
                        "resourceDomains": [],
                        "frameDomains": [],
                        "baseUriDomains": [],
                    },
                    "prefersBorder": True,
                }
            }


@pytest.mark.sqlite_only
async def test_the_cards_actions_are_what_the_write_tools_admit(
    settings: Settings, add_caller, server_as
) -> None:
    """An agent writing everywhere is offered the four actions; one writing in billing
    only, none on a support ticket; a reader, none; an agent offered the read and
    respond toolsets only, the note and the reply; on a closed ticket, the note only.
    `statuses` are the moves the ticket's status allows. A read-only deployment: none."""
    await add_caller("agent", scopes=AGENT_SCOPES)
    await add_caller("billing-agent", scopes=AGENT_SCOPES, write_queues=["billing"])
    await add_caller("reader", scopes=("tickets:read",))
    await add_caller("responder", scopes=AGENT_SCOPES, toolsets=["read", "respond"])
    support = (await _sql(settings, "SELECT id FROM tickets WHERE queue = 'support' LIMIT 1"))[0][0]
    closed = (await _sql(settings, "SELECT id FROM tickets WHERE status = 'closed' LIMIT 1"))[0][0]
    every = ["add_internal_note", "reply_to_customer", "set_ticket_status", "assign_ticket"]
    expected = {
        ("agent", "SUP-4412"): every,
        ("billing-agent", "SUP-4412"): every,
        ("billing-agent", support): [],
        ("reader", "SUP-4412"): [],
        ("responder", "SUP-4412"): ["add_internal_note", "reply_to_customer"],
        ("agent", closed): ["add_internal_note"],  # a closed ticket takes notes only
    }
    for (caller, ticket), actions in expected.items():
        async with Client(server_as(stdio_caller=caller), extensions=[apps_extension()]) as client:
            result = await client.call_tool("get_ticket", {"ticket_id": ticket})
            app = (result.meta or {})[APP_META]
            assert (caller, ticket, app["actions"]) == (caller, ticket, actions)
            assert app["board"] is True
            if ticket == closed:  # closed is final
                assert app["statuses"] == []
            if ticket == "SUP-4412":  # waiting_on_customer: its allowed moves
                assert app["statuses"] == ["open", "in_progress", "resolved", "closed"]
    read_only = server_as(stdio_caller="agent", read_only=True)  # no write tool at all
    async with Client(read_only, extensions=[apps_extension()]) as client:
        result = await client.call_tool("get_ticket", {"ticket_id": "SUP-4412"})
        assert (result.meta or {})[APP_META]["actions"] == []


async def test_the_board_counts_what_the_database_holds(
    settings: Settings, add_caller, server_as, backend: str
) -> None:
    """get_queue_board's counts are the queue's rows by status and its open rows by
    priority; its oldest open tickets come oldest first with customer-written subjects
    labelled; a queue outside the caller's is an error that names no ticket."""
    await add_caller("billing", scopes=("tickets:read",), queues=["billing"])
    by_status = dict(
        await _sql(
            settings, "SELECT status, count(*) FROM tickets WHERE queue = 'billing' GROUP BY status"
        )
    )
    async with Client(server_as(stdio_caller="billing"), extensions=[apps_extension()]) as client:
        board = (await client.call_tool(BOARD_TOOL, {"queue": "billing"})).structured_content
        assert board["by_status"] == {str(k): v for k, v in by_status.items()}
        assert (
            board["open_total"]
            == sum(board["open_by_priority"].values())
            == sum(
                by_status.get(s, 0) for s in ("new", "open", "in_progress", "waiting_on_customer")
            )
        )
        created = [t["created_at"] for t in board["oldest_open"]]
        assert created == sorted(created) and len(created) == 10
        assert all(t["subject"]["untrusted"] is True for t in board["oldest_open"])
        refused = await client.call_tool(BOARD_TOOL, {"queue": "support"}, raise_on_error=False)
        assert refused.is_error and "SUP-" not in refused.content[0].text  # type: ignore[union-attr]


async def test_the_board_carries_the_queues_sla_overview(
    settings: Settings, add_caller, server_as
) -> None:
    """With an SLA policy loaded, the board's breached count and breaching-soon list are
    the queue overview's (tickets://queue/billing, issue 34), so the view shows them."""
    from tests.tools.test_backlog import _load, policy

    await _load(settings, policy(high_resolution=600))
    await add_caller("billing", scopes=("tickets:read",), queues=["billing"])
    async with Client(server_as(stdio_caller="billing"), extensions=[apps_extension()]) as client:
        board = (await client.call_tool(BOARD_TOOL, {"queue": "billing"})).structured_content
        read = await client.read_resource("tickets://queue/billing")
        overview = json.loads(read[0].text)  # type: ignore[union-attr]
    assert board["breached"] == overview["breached"] and board["breached"] > 0
    assert board["breaching_soon"] == overview["breaching_soon"]


async def test_the_board_reads_a_queue_named_as_the_other_tools_name_it(
    settings: Settings, add_caller, server_as
) -> None:
    """`Billing` is the billing queue for the board as for count_tickets and
    tickets://queue/{name}: the same counts and SLA lists (its counts were empty beside
    billing's breached tickets), for a caller of every queue and for one limited to
    billing (refused before); a queue that does not exist is an error, not an empty
    board; an operator's queue with no ticket yet is an empty board."""
    from tests.tools.test_backlog import _load, policy
    from ticket_server.db import open_repository
    from ticket_server.tickets.directory import add_queue

    await _load(settings, policy(high_resolution=600))
    repo = open_repository(settings)
    try:
        await repo.transaction(lambda conn: add_queue(conn, "legal", None, "", "UTC"))
    finally:
        await repo.aclose()
    await add_caller("reader", scopes=("tickets:read",))
    await add_caller("billing", scopes=("tickets:read",), queues=["billing"])
    for caller in ("reader", "billing"):
        server = server_as(stdio_caller=caller)
        async with Client(server, extensions=[apps_extension()]) as client:
            exact = (await client.call_tool(BOARD_TOOL, {"queue": "billing"})).structured_content
            named = await client.call_tool(BOARD_TOOL, {"queue": "Billing"}, raise_on_error=False)
            assert not named.is_error, (caller, named.content)
            board = named.structured_content
            assert board["queue"] == "billing" and board["by_status"] == exact["by_status"]
            assert board["breached"] == exact["breached"] and board["open_total"] > 0
            unknown = await client.call_tool(BOARD_TOOL, {"queue": "nosuch"}, raise_on_error=False)
            assert unknown.is_error and "nosuch" in unknown.content[0].text  # type: ignore[union-attr]
    async with Client(server_as(stdio_caller="reader"), extensions=[apps_extension()]) as client:
        empty = (await client.call_tool(BOARD_TOOL, {"queue": "legal"})).structured_content
        assert (empty["by_status"], empty["open_total"], empty["oldest_open"]) == ({}, 0, [])
