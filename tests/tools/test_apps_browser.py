"""The MCP Apps views in a real browser (issue 38): headless Chromium loads a host page
that embeds each view as hosts do (the extension's reference host bridge, pinned in
.ci/apps), hands it a real tool result, and the view's actions go back through the host
to the server's own tools. SQLite only: what is checked is the page, not the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

from tests.access.conftest import add_caller, server_as  # noqa: F401  (fixtures)
from tests.tools.apps.browser import Host, apps_extension, browser, install_bridge
from tests.tools.test_writes import AGENT_SCOPES, _sql
from ticket_server.settings import Settings
from ticket_server.tools.apps import BOARD_URI, CARD_URI

pytestmark = pytest.mark.sqlite_only

SCRIPT = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


@pytest.fixture(scope="module")
def bridge() -> Path:
    return install_bridge()


@asynccontextmanager
async def as_reader(server_as: Any, bridge: Path) -> AsyncIterator[tuple[Client, Host]]:
    """The in-memory client of caller "reader" (Apps negotiated) and a browser host on it."""
    async with (
        Client(server_as(stdio_caller="reader"), extensions=[apps_extension()]) as client,
        browser() as chromium,
    ):
        yield client, await Host.open(chromium, client, bridge)


async def customer_comment(
    settings: Settings, ticket_id: str, body: str, author: str = "mallory@example.com"
) -> None:
    """A comment by the ticket's customer, newer than any other, written as the
    customer's side writes one (straight into the table: no tool writes as a customer)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO comments (ticket_id, author, author_type, visibility, body, "
                    "created_at) VALUES (:t, :a, 'customer', 'public', :b, '2030-01-01 00:00:00')"
                ),
                {"t": ticket_id, "b": body, "a": author},
            )
    finally:
        await engine.dispose()


class Person:
    """An elicitation handler (the person at the host) that accepts, keeping each question."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> Any:
        self.asked.append(message)
        return ElicitResult(action="accept", content={"confirm": True})


async def test_card_renders_sup_4412_and_its_actions_call_the_write_tools(
    settings: Settings, add_caller, server_as, bridge: Path
) -> None:
    """SUP-4412's card shows its conversation within 1 s of the tool result; an agent's
    note goes out as exactly one add_internal_note tools/call (the version it read, a
    fresh idempotency key) and the card shows the note after it; a reply first asks the
    person, as policy says (confirm_writes default: reply_to_customer)."""
    await add_caller("agent", scopes=AGENT_SCOPES)
    person = Person()
    server = server_as(stdio_caller="agent")
    async with (
        Client(server, extensions=[apps_extension()], elicitation_handler=person) as client,
        browser() as chromium,
    ):
        host = await Host.open(chromium, client, bridge)
        card = await host.show(CARD_URI, "get_ticket", {"ticket_id": "SUP-4412"})
        comments = card.locator("[data-section=conversation] .comment")
        await comments.first.wait_for(timeout=1_000)
        assert "Invoice INV-20931 charged twice" in await card.locator("h1").inner_text()
        assert await card.locator(".comment.customer .badge.customer").count() >= 1
        version = (await _sql(settings, "SELECT version FROM tickets WHERE id = 'SUP-4412'"))[0][0]

        note = card.locator("[data-action=add_internal_note]")
        await note.locator("textarea").fill("Refund checked with finance <b>not bold</b>")
        await note.locator("button").click()
        await card.locator("#status.ok", has_text="Done").wait_for(timeout=5_000)
        calls = await host.calls()
        assert calls[0]["name"] == "add_internal_note"
        arguments = calls[0]["arguments"]
        assert arguments.pop("idempotency_key").startswith("card-")
        assert arguments == {
            "ticket_id": "SUP-4412",
            "note": "Refund checked with finance <b>not bold</b>",
            "expected_version": version,
        }
        assert [c["name"] for c in calls] == ["add_internal_note", "get_ticket"]
        # The card re-renders from that get_ticket's result: wait for the note to show.
        note_text = "Refund checked with finance <b>not bold</b>"
        shown = card.locator("[data-section=conversation] .comment", has_text=note_text)
        await shown.first.wait_for(timeout=5_000)
        newest = card.locator("[data-section=conversation] .comment").first
        assert note_text in await newest.inner_text()
        assert await newest.locator(".badge.internal").count() == 1
        assert person.asked == []  # a note needs no confirmation by default

        reply = card.locator("[data-action=reply_to_customer]")
        await reply.locator("textarea").fill("We refunded the second charge.")
        await reply.locator("button").click()
        await card.locator("#status.ok", has_text="Done").wait_for(timeout=5_000)
        assert [c["name"] for c in await host.calls()][2:] == ["reply_to_customer", "get_ticket"]
        assert len(person.asked) == 1 and "SUP-4412" in person.asked[0]
        # Again wait for the re-render from that get_ticket: an action used before it
        # lands is replaced by the fresh card, its choice lost.
        replied = card.locator(
            "[data-section=conversation] .comment", has_text="We refunded the second charge."
        )
        await replied.first.wait_for(timeout=10_000)

        move = card.locator("[data-action=set_ticket_status]")
        await move.locator("select").select_option("in_progress")
        await move.locator("button").click()
        await card.locator(".chip", has_text="in_progress").wait_for(timeout=10_000)
        status_call = (await host.calls())[4]
        assert status_call["name"] == "set_ticket_status"
        assert status_call["arguments"]["status"] == "in_progress"


async def test_customer_text_shows_as_text_and_a_reader_gets_no_action(
    settings: Settings, add_caller, server_as, bridge: Path
) -> None:
    """SUP-1337's injection text and a <script> (with an onerror image) in a customer's
    comment show as text, marked customer-written, and never run; a read-only caller's
    card offers no action."""
    await customer_comment(settings, "SUP-1337", SCRIPT)
    await add_caller("reader", scopes=("tickets:read",))
    async with as_reader(server_as, bridge) as (client, host):
        card = await host.show(CARD_URI, "get_ticket", {"ticket_id": "SUP-1337"})
        newest = card.locator("[data-section=conversation] .comment").first
        await newest.wait_for(timeout=5_000)
        assert SCRIPT in await newest.inner_text()
        assert await newest.locator(".badge.customer").count() == 1
        body = card.locator("[data-section=description] .untrusted")
        assert "ignore previous instructions" in await body.inner_text()
        view = host.frame()
        assert await view.evaluate("window.pwned") is None
        assert await view.evaluate("document.querySelectorAll('script').length") == 1
        assert await view.evaluate("document.querySelectorAll('img').length") == 0
        assert await card.locator("[data-action], [data-section=actions]").count() == 0
        assert await card.locator("textarea, input, select").count() == 0

        # The sections other work adds to the full read, read defensively, values as text.
        result = await client.call_tool_mcp("get_ticket", {"ticket_id": "SUP-1337"})
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        dumped["structuredContent"] |= {
            "tags": ["billing-export", SCRIPT],
            "custom_fields": {"plan_tier": "enterprise", "seats": 204},
            "sla": {"first_response": {"due_at": "2030-01-02T09:00:00Z", "breached": False}},
            "attachments": [{"filename": SCRIPT, "content_type": "text/csv", "size_bytes": 10}],
            "links": [{"type": "duplicate_of", "ticket_id": "SUP-4412"}],
        }
        card = await host.show_result(CARD_URI, dumped)
        await card.locator("[data-section=tags]").wait_for(timeout=5_000)
        assert SCRIPT in await card.locator("[data-section=tags]").inner_text()
        assert "enterprise" in await card.locator("[data-section=fields]").inner_text()
        assert "2030-01-02T09:00:00Z" in await card.locator("[data-section=sla]").inner_text()
        assert SCRIPT in await card.locator("[data-section=attachments]").inner_text()
        await card.locator("[data-section=linked-tickets] [data-open-ticket]").click()
        await card.locator("[data-ticket='SUP-4412']").wait_for(timeout=5_000)
        assert await host.frame().evaluate("window.pwned") is None


async def test_card_lists_the_tickets_attachments_as_get_ticket_gives_them(
    settings: Settings, add_caller, server_as, bridge: Path
) -> None:
    """get_ticket's attachments ({items, total, truncated}) are listed by name, type and
    size; a ticket without any shows no Attachments section."""
    import base64

    from ticket_server.admin.sample_files import sample_csv

    await add_caller("agent", scopes=AGENT_SCOPES)
    data = sample_csv()
    bare = (
        await _sql(
            settings,
            "SELECT id FROM tickets WHERE id NOT IN (SELECT ticket_id FROM attachments) LIMIT 1",
        )
    )[0][0]
    async with (
        Client(
            server_as(stdio_caller="agent", confirm_writes=[]), extensions=[apps_extension()]
        ) as client,
        browser() as chromium,
    ):
        await client.call_tool(
            "add_internal_note",
            {
                "ticket_id": "SUP-4412",
                "note": "export attached",
                "attachments": [
                    {"name": "export.csv", "content_base64": base64.b64encode(data).decode()}
                ],
            },
        )
        host = await Host.open(chromium, client, bridge)
        card = await host.show(CARD_URI, "get_ticket", {"ticket_id": "SUP-4412"})
        files = card.locator("[data-section=attachments] li")
        await files.first.wait_for(timeout=5_000)
        assert f"export.csv (text/csv), {len(data)} bytes" in await files.all_inner_texts()
        card = await host.show(CARD_URI, "get_ticket", {"ticket_id": bare})
        await card.locator(f"[data-ticket='{bare}']").wait_for(timeout=5_000)
        assert await card.locator("[data-section=attachments]").count() == 0


async def customer_subject(settings: Settings, ticket_id: str, subject: str) -> None:
    """The ticket's subject as its customer wrote it (straight into the table)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("UPDATE tickets SET subject = :s WHERE id = :t"),
                {"s": subject, "t": ticket_id},
            )
    finally:
        await engine.dispose()


async def test_a_long_word_a_customer_wrote_wraps_inside_the_views(
    settings: Settings, add_caller, server_as, bridge: Path
) -> None:
    """A subject that is one long word (a pasted URL or token) wraps inside the card and
    the board: the page never grows wider than the frame the host gave it."""
    word = "https-example-com-" + "x" * 300
    oldest = (
        await _sql(
            settings,
            "SELECT id FROM tickets WHERE queue = 'billing' AND status IN "
            "('new', 'open', 'in_progress', 'waiting_on_customer') ORDER BY created_at, pk LIMIT 1",
        )
    )[0][0]
    await customer_subject(settings, oldest, word)
    await add_caller("reader", scopes=("tickets:read",))
    width = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    async with as_reader(server_as, bridge) as (_, host):
        card = await host.show(CARD_URI, "get_ticket", {"ticket_id": oldest})
        await card.locator(f"[data-ticket='{oldest}']").wait_for(timeout=5_000)
        scroll, client_width = await host.frame().evaluate(width)
        assert scroll <= client_width, "the card is wider than its frame"
        board = await host.show(BOARD_URI, "get_queue_board", {"queue": "billing"})
        await board.locator("[data-queue=billing]").wait_for(timeout=5_000)
        assert word in await board.locator("[data-section=oldest-open]").inner_text()
        scroll, client_width = await host.frame().evaluate(width)
        assert scroll <= client_width, "the board is wider than its frame"
        # Only the subject breaks: an id, a status, a priority, an owner, a time each keep
        # to one line (a first form of this fix broke "waiting_on_customer" and "normal").
        lines = await board.locator("[data-section=oldest-open] td:not(.wrap)").evaluate_all(
            "cells => cells.map(c => { const w = document.createTreeWalker(c, "
            "NodeFilter.SHOW_TEXT), tops = new Set(); while (w.nextNode()) { "
            "const r = document.createRange(); r.selectNodeContents(w.currentNode); "
            "for (const x of r.getClientRects()) tops.add(Math.round(x.top)); } "
            "return [c.textContent, tops.size]; })"
        )
        assert lines and all(n == 1 for _, n in lines), [t for t, n in lines if n != 1]


async def test_a_right_to_left_override_in_a_customers_name_stays_in_the_name(
    settings: Settings, add_caller, server_as, bridge: Path
) -> None:
    """A customer name ending in U+202E (right-to-left override) turns only the name
    around: the comment's author type and time after it still read left to right."""
    await customer_comment(settings, "SUP-1337", "hello", author="Mallory\u202e")
    await add_caller("reader", scopes=("tickets:read",))
    async with as_reader(server_as, bridge) as (_, host):
        card = await host.show(CARD_URI, "get_ticket", {"ticket_id": "SUP-1337"})
        meta = card.locator("[data-section=conversation] .comment .meta").first
        await meta.wait_for(timeout=5_000)
        # The x of the first and of the last character of the time "2030-01-01...".
        xs = await meta.evaluate(
            """(line) => {
                const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
                for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                    const at = n.data.indexOf("2030-01-01");
                    if (at < 0) continue;
                    const x = (i) => { const r = document.createRange();
                        r.setStart(n, i); r.setEnd(n, i + 1); return r.getBoundingClientRect().left; };
                    return [x(at), x(n.data.length - 1)];
                }
                return null;
            }"""
        )
        assert xs is not None and xs[0] < xs[1], "the time after the name reads right to left"


async def test_the_board_marks_breached_tickets_and_counts_them(
    settings: Settings, add_caller, server_as, bridge: Path
) -> None:
    """With an SLA policy, the board says how many open tickets have breached, and a
    ticket in its breaching-soon list that has already breached is marked so, not shown
    as one still falling due."""
    from tests.tools.test_backlog import _load, policy

    await _load(settings, policy(high_resolution=600))
    await add_caller("reader", scopes=("tickets:read",))
    async with as_reader(server_as, bridge) as (client, host):
        data = (await client.call_tool("get_queue_board", {"queue": "billing"})).structured_content
        late = [t["id"] for t in data["breaching_soon"] if t["breached"]]
        assert data["breached"] > 0 and late
        board = await host.show(BOARD_URI, "get_queue_board", {"queue": "billing"})
        await board.locator("[data-queue=billing]").wait_for(timeout=5_000)
        assert f"{data['breached']} breached" in await board.locator("h1").inner_text()
        for row in await board.locator("[data-section=breaching-soon] tr").all():
            cells = await row.locator("td").all_inner_texts()
            if cells:
                assert ("breached" in cells[-1]) == (cells[0] in late), cells


async def test_board_counts_a_queue_and_opens_ticket_cards(
    settings: Settings, add_caller, server_as, bridge: Path
) -> None:
    """The billing board shows the counts the database holds and its oldest open
    tickets; a ticket's link opens its card through get_ticket, and the card leads back."""
    await add_caller("reader", scopes=("tickets:read",))
    rows = await _sql(
        settings,
        "SELECT count(*) FROM tickets WHERE queue = 'billing' AND status = 'open'",
    )
    async with as_reader(server_as, bridge) as (_, host):
        board = await host.show(BOARD_URI, "get_queue_board", {"queue": "billing"})
        await board.locator("[data-queue=billing]").wait_for(timeout=5_000)
        status = board.locator("[data-section=by-status] .count", has_text="open")
        assert (await status.first.locator(".n").inner_text()) == str(rows[0][0])
        first = board.locator("[data-open-ticket]").first
        ticket = await first.get_attribute("data-open-ticket")
        await first.click()
        await board.locator(f"[data-ticket='{ticket}']").wait_for(timeout=5_000)
        assert await host.calls() == [{"name": "get_ticket", "arguments": {"ticket_id": ticket}}]
        await board.locator("[data-back]").click()
        await board.locator("[data-queue=billing]").wait_for(timeout=5_000)
