"""Authorship (issue 33, C36): what a caller of kind ``assistant`` writes reads back as an
assistant's (``by_assistant: true``, its text untrusted), never as an agent's; a person's
caller still writes as an agent. On both engines and both protocol revisions."""

from __future__ import annotations

from typing import Any

from fastmcp import Client

from tests.access.conftest import add_caller, server_as  # noqa: F401  (fixtures)
from tests.tools.test_writes import AGENT_SCOPES, _sql, ticket_in
from ticket_server.settings import Settings


async def _write_note_and_reply(client: Client, ticket: str, tag: str) -> None:
    note = await client.call_tool(
        "add_internal_note", {"ticket_id": ticket, "note": f"note by {tag}"}
    )
    assert not note.is_error
    reply = await client.call_tool(
        "reply_to_customer", {"ticket_id": ticket, "reply": f"reply by {tag}"}
    )
    assert not reply.is_error
    moved = await client.call_tool("assign_ticket", {"ticket_id": ticket, "owner": tag})
    assert not moved.is_error


def _comments(ticket: dict[str, Any], tag: str) -> list[dict[str, Any]]:
    return [c for c in ticket["conversation"]["comments"] if c["body"]["text"].endswith(tag)]


async def test_c36_assistant_written_note_and_reply_are_labelled_as_an_assistants(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """C36: a note and a reply by an assistant caller, then get_ticket: the comments name
    the caller and say an assistant wrote them (by_assistant true, untrusted), and
    its history event too; the same writes by a person's caller read as an agent's."""
    await add_caller("helper-bot", scopes=AGENT_SCOPES, queues=["billing"], kind="assistant")
    await add_caller("dana", scopes=AGENT_SCOPES, queues=["billing"])
    ticket = await ticket_in(settings, "billing")
    for caller in ("helper-bot", "dana"):
        server = server_as(stdio_caller=caller, confirm_writes=[])
        async with Client(server, mode=mode) as client:
            await _write_note_and_reply(client, ticket, caller)
    server = server_as(stdio_caller="dana", confirm_writes=[])
    async with Client(server, mode=mode) as client:
        read = await client.call_tool(
            "get_ticket", {"ticket_id": ticket, "fields": ["conversation", "history"]}
        )
    data = read.structured_content
    assert data is not None
    bot = _comments(data, "helper-bot")
    person = _comments(data, "dana")
    assert len(bot) == 2 and len(person) == 2
    for c in bot:
        assert c["author"] == "helper-bot"
        assert c["author_type"] == "agent" and c["by_assistant"] is True
        assert c["body"]["untrusted"] is True
    for c in person:
        assert c["author"] == "dana"
        assert c["author_type"] == "agent" and c["by_assistant"] is False
        assert c["body"]["untrusted"] is False
    events = {e["actor"]: e["by_assistant"] for e in data["history"]["events"]}
    assert events["helper-bot"] is True and events["dana"] is False
    stored = await _sql(
        settings,
        "SELECT author, by_assistant FROM comments WHERE ticket_id = :t AND author IN "
        "('helper-bot', 'dana') ORDER BY pk",
        t=ticket,
    )
    assert [(a, bool(b)) for a, b in stored] == [
        ("helper-bot", True),
        ("helper-bot", True),
        ("dana", False),
        ("dana", False),
    ]
