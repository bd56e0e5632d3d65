"""link_tickets and merge_tickets (issue 36, items 2 and 3) through the in-memory client,
on SQLite and PostgreSQL, in both protocol revisions: links shown both ways and only to
tickets the caller can see; a merge moves every comment exactly once, closes the source,
survives a retry with its key, and is refused across queues and for a merged source."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import text_of
from tests.tools.test_writes import _sql
from ticket_server.settings import Settings

AGENT_SCOPES = ("tickets:read", "tickets:write")
EVERY_TOOLSET = ["read", "respond", "triage", "related"]


async def _open(settings: Settings, queue: str, n: int) -> list[str]:
    """``n`` open tickets of ``queue`` with comments, most comments first."""
    rows = await _sql(
        settings,
        "SELECT t.id FROM tickets t JOIN comments c ON c.ticket_id = t.id "
        "WHERE t.queue = :queue AND t.status IN ('open', 'in_progress') "
        "GROUP BY t.id ORDER BY count(*) DESC, t.id LIMIT :n",
        queue=queue,
        n=n,
    )
    assert len(rows) == n, f"the sample lacks {n} open {queue} tickets with comments"
    return [r[0] for r in rows]


async def _links(client: Client, ticket_id: str) -> set[tuple[str, str]]:
    result = await client.call_tool("get_ticket", {"ticket_id": ticket_id, "fields": ["links"]})
    return {(link["type"], link["ticket_id"]) for link in result.structured_content["links"]}


async def test_links_are_shown_both_ways_and_only_to_tickets_in_scope(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing", "support"])
    await add_caller("biller", scopes=AGENT_SCOPES, queues=["billing"])
    a, b = await _open(settings, "billing", 2)
    (c,) = await _open(settings, "support", 1)
    agent = server_as(stdio_caller="agent", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(agent, mode=mode) as client:
        done = await client.call_tool(
            "link_tickets", {"ticket_id": a, "link": "duplicate_of", "other_ticket_id": b}
        )
        assert done.structured_content["ticket"]["id"] == a
        await client.call_tool(
            "link_tickets", {"ticket_id": c, "link": "causes", "other_ticket_id": a}
        )
        await client.call_tool(
            "link_tickets", {"ticket_id": b, "link": "related", "other_ticket_id": c}
        )
        assert await _links(client, a) == {("duplicate_of", b), ("caused_by", c)}
        assert await _links(client, b) == {("duplicated_by", a), ("related", c)}
        assert await _links(client, c) == {("causes", a), ("related", b)}
        again = await client.call_tool(
            "link_tickets",
            {"ticket_id": c, "link": "related", "other_ticket_id": b},
            raise_on_error=False,
        )
        assert again.is_error and "already related" in text_of(again)
        await client.call_tool(
            "link_tickets",
            {"ticket_id": c, "link": "related", "other_ticket_id": b, "remove": True},
        )
        assert await _links(client, b) == {("duplicated_by", a)}
    biller = server_as(stdio_caller="biller", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(biller, mode=mode) as client:
        assert await _links(client, a) == {("duplicate_of", b)}  # c is another queue's
        refused = await client.call_tool(
            "link_tickets",
            {"ticket_id": a, "link": "related", "other_ticket_id": c},
            raise_on_error=False,
        )
        assert refused.is_error and f"No ticket {c} in a queue this caller may write" in text_of(
            refused
        )
    rows = await audit_rows(settings, tool="link_tickets")
    assert sorted(r.outcome for r in rows) == ["ok"] * 4 + ["tool_error"] * 2


async def _yes(message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


async def test_merge_moves_every_comment_once_and_survives_a_retry(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """Merged with the default policy (a person confirms), with a key: the source's first
    message and every comment appear once in the target, marked; the source is closed,
    duplicate_of the target; a retry with the key writes nothing; a second merge of the
    source is refused; merging into another queue's ticket is refused."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    source, target = await _open(settings, "billing", 2)
    (elsewhere,) = await _open(settings, "support", 1)
    comments = [
        r[0]
        for r in await _sql(
            settings, "SELECT pk FROM comments WHERE ticket_id = :t ORDER BY pk", t=source
        )
    ]
    assert comments
    total = (await _sql(settings, "SELECT count(*) FROM comments"))[0][0]
    server = server_as(stdio_caller="agent", toolsets=EVERY_TOOLSET)
    arguments = {
        "source_ticket_id": source,
        "target_ticket_id": target,
        "idempotency_key": "merge-1",
    }
    async with Client(server, mode=mode, elicitation_handler=_yes) as client:
        across = await client.call_tool(
            "merge_tickets",
            {"source_ticket_id": source, "target_ticket_id": elsewhere},
            raise_on_error=False,
        )
        assert across.is_error and f"No ticket {elsewhere}" in text_of(across)
        merged = await client.call_tool("merge_tickets", arguments)
        assert merged.structured_content["source"]["status"] == "closed"
        assert merged.structured_content["comments_moved"] == len(comments)
        retry = await client.call_tool("merge_tickets", arguments)
        assert retry.structured_content == merged.structured_content
        assert retry.meta and retry.meta.get("dev.ticket-server/replay") is True
        again = await client.call_tool(
            "merge_tickets",
            {**arguments, "idempotency_key": "merge-2"},
            raise_on_error=False,
        )
        assert again.is_error and f"already merged into {target}" in text_of(again)
        read = await client.call_tool("get_ticket", {"ticket_id": target, "limit": 50})
    moved = await _sql(
        settings,
        "SELECT pk FROM comments WHERE ticket_id = :t AND merged_from = :s ORDER BY pk",
        t=target,
        s=source,
    )
    assert [r[0] for r in moved][: len(comments)] == comments  # re-pointed, each once
    assert len(moved) == len(comments) + 1  # and the source's first message
    # Three comments written: the first message on the target, a note on each ticket.
    assert (await _sql(settings, "SELECT count(*) FROM comments"))[0][0] == total + 3
    assert (await _sql(settings, "SELECT count(*) FROM comments WHERE ticket_id = :t", t=source))[
        0
    ][0] == 1
    assert await _sql(
        settings,
        "SELECT type FROM ticket_links WHERE ticket_id = :s AND other_id = :t",
        s=source,
        t=target,
    ) == [("duplicate_of",)]
    shown = read.structured_content
    assert ("duplicated_by", source) in {(x["type"], x["ticket_id"]) for x in shown["links"]}
    assert any(c.get("merged_from") == source for c in shown["conversation"]["comments"])
    rows = await audit_rows(settings, tool="merge_tickets")
    # (2026-07-28 also audits the call answered with input_required.)
    assert [r.outcome for r in rows].count("tool_error") == 2
    ok = [r for r in rows if r.outcome == "ok" and r.change]
    assert len(ok) == 1 and '"confirmation": "accepted"' in ok[0].change


@pytest.mark.parametrize("mode", ["legacy"])
async def test_merge_without_a_person_to_confirm_changes_nothing(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    source, target = await _open(settings, "billing", 2)
    before = await _sql(settings, "SELECT status, version FROM tickets WHERE id = :t", t=source)
    async with Client(server_as(stdio_caller="agent", toolsets=EVERY_TOOLSET), mode=mode) as c:
        refused = await c.call_tool(
            "merge_tickets",
            {"source_ticket_id": source, "target_ticket_id": target},
            raise_on_error=False,
        )
    assert refused.is_error and "confirmation" in text_of(refused)
    assert await _sql(settings, "SELECT status, version FROM tickets WHERE id = :t", t=source) == (
        before
    )


@pytest.mark.postgresql_only
async def test_crossed_merges_do_not_deadlock(settings: Settings, add_caller, server_as) -> None:
    """Merging A into B while B is merged into A, at once, for six pairs: one of each
    pair merges, the other is refused as it should be (its target is closed), and none
    fails on a deadlock. PostgreSQL only: SQLite serialises every write transaction, so
    two writes never hold row locks at once there."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    tickets = await _open(settings, "billing", 12)
    pairs = list(zip(tickets[::2], tickets[1::2], strict=True))
    server = server_as(stdio_caller="agent", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(server) as client:

        async def merge(source: str, target: str) -> Any:
            return await client.call_tool(
                "merge_tickets",
                {"source_ticket_id": source, "target_ticket_id": target},
                raise_on_error=False,
            )

        for a, b in pairs:
            first, second = await asyncio.gather(merge(a, b), merge(b, a))
            results = sorted([first, second], key=lambda r: r.is_error)
            assert [r.is_error for r in results] == [False, True], (a, b)
            assert "is closed, so nothing can be merged into it" in text_of(results[1])


@pytest.mark.postgresql_only
async def test_one_link_named_from_both_sides_at_once_is_stored_once(
    settings: Settings, add_caller, server_as, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`A duplicate_of B` and `B duplicated_by A` (one link, stored from A's side), or `A
    related B` and `B related A`, sent at once for four pairs: one is written, the other
    refused as the link made already; the link is stored once. Each write's check is
    held open 0.3 s, so the two overlap. A review found each write locking its own
    ticket only: the two deadlocked (each link row's key on the other ticket waits for
    that ticket's lock), one answered "The ticket database is unavailable". PostgreSQL
    only: SQLite serialises every write transaction."""
    from sqlalchemy import text

    from ticket_server.tickets import links

    checked = links.has_link

    def slow_check(conn: Any, *args: Any) -> bool:
        found = checked(conn, *args)
        conn.execute(text("SELECT pg_sleep(0.3)"))
        return found

    monkeypatch.setattr(links, "has_link", slow_check)
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    tickets = await _open(settings, "billing", 12)
    pairs = list(zip(tickets[::2], tickets[1::2], strict=True))[:4]
    server = server_as(stdio_caller="agent", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(server) as client:

        async def link(ticket: str, name: str, other: str) -> Any:
            return await client.call_tool(
                "link_tickets",
                {"ticket_id": ticket, "link": name, "other_ticket_id": other},
                raise_on_error=False,
            )

        for number, (a, b) in enumerate(pairs):
            names = ("duplicate_of", "duplicated_by") if number % 2 else ("related", "related")
            first, second = await asyncio.gather(link(a, names[0], b), link(b, names[1], a))
            results = sorted([first, second], key=lambda r: r.is_error)
            assert [r.is_error for r in results] == [False, True], (a, b, text_of(results[1]))
            refused = text_of(results[1])
            assert any(f"is already {name}" in refused for name in names), refused
            stored = await _sql(
                settings,
                "SELECT count(*) FROM ticket_links WHERE ticket_id IN (:a, :b) "
                "AND other_id IN (:a, :b)",
                a=a,
                b=b,
            )
            assert stored[0][0] == 1, (a, b)


async def test_a_merge_moves_the_files_of_the_conversation_it_moves(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """The files of the source's comments (and of its first message) go with them to the
    target: listed by the target's get_ticket and read by a caller of the target's queue,
    answered as missing to a caller who sees only the source's queue, as the comments
    are. A review found them left on the closed source: the target's readers saw a note
    "file attached" and could not find the file, and readers of the source's queue alone
    kept reading a file whose conversation had moved to another queue."""
    import base64

    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing", "support"])
    await add_caller("support-only", scopes=("tickets:read",), queues=["support"])
    await add_caller("billing-only", scopes=("tickets:read",), queues=["billing"])
    (source,) = await _open(settings, "billing", 1)
    (target,) = await _open(settings, "support", 1)
    data = b"order 4412, refund 12.50 CHF\n"
    upload = {"name": "refund.txt", "content_base64": base64.b64encode(data).decode()}
    toolsets = [*EVERY_TOOLSET, "attachments"]
    server = server_as(stdio_caller="agent", toolsets=toolsets, confirm_writes=[])
    async with Client(server, mode=mode) as client:
        noted = await client.call_tool(
            "add_internal_note",
            {"ticket_id": source, "note": "Refund file attached.", "attachments": [upload]},
        )
        (file,) = noted.structured_content["attachments"]
        await client.call_tool(
            "merge_tickets", {"source_ticket_id": source, "target_ticket_id": target}
        )
        left = await client.call_tool("get_ticket", {"ticket_id": source})
        assert left.structured_content["attachments"]["items"] == []
    uri = f"tickets://attachment/{file['id']}"
    async with Client(server_as(stdio_caller="support-only", toolsets=toolsets), mode=mode) as c:
        read = await c.call_tool("get_ticket", {"ticket_id": target})
        assert [a["id"] for a in read.structured_content["attachments"]["items"]] == [file["id"]]
        got = await c.call_tool("get_attachment", {"attachment_id": file["id"]})
        assert got.structured_content["ticket_id"] == target
        (content,) = await c.read_resource(uri)
        assert base64.b64decode(content.blob) == data
    async with Client(server_as(stdio_caller="billing-only", toolsets=toolsets), mode=mode) as c:
        missing = await c.call_tool(
            "get_attachment", {"attachment_id": file["id"]}, raise_on_error=False
        )
        assert missing.is_error and f"No attachment with id {file['id']}" in text_of(missing)
