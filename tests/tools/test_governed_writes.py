"""The checks a helpdesk makes on a write, on SQLite and PostgreSQL, in both revisions
(in memory): queues from the known set (C32), NUL and control characters (C33), an
idempotency replay never asks again (C34), the escalation reason as a digest (C35), the
closed-ticket rule (C37), refused before the person is asked (C43), one key on twenty
tickets at once (C48), keys in ``_meta``, and the audit's figures and details."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import text_of
from tests.tools.test_writes import AGENT_SCOPES, WRITE_TOOLS, _sql, state, ticket_in
from ticket_server.settings import Settings


class Person:
    """An elicitation handler that answers ``answer`` and counts the questions."""

    def __init__(self, answer: str = "accept") -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def __call__(self, message, response_type, params, context):
        self.asked.append(message)
        content = {"confirm": True} if self.answer == "accept" else None
        return ElicitResult(action=self.answer, content=content)


async def closed_in(settings: Settings, queue: str) -> str:
    rows = await _sql(
        settings,
        "SELECT id FROM tickets WHERE queue = :q AND status = 'closed' ORDER BY pk LIMIT 1",
        q=queue,
    )
    return rows[0][0]


async def _call(client: Client, tool: str, arguments: dict[str, Any], **kw: Any):
    return await client.call_tool(tool, arguments, raise_on_error=False, **kw)


async def test_escalation_queues_are_the_known_set_folded(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """C32: an unknown or blank queue is an isError naming the queues this caller may
    write, nothing moved; case and surrounding spaces are folded as everywhere else."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing", "engineering"])
    await add_caller("anywhere", scopes=AGENT_SCOPES)
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    async with Client(server_as(stdio_caller="agent", confirm_writes=[]), mode=mode) as client:
        for queue in ("no-such-queue", "   ", "Billing x"):
            refused = await _call(
                client, "escalate_ticket", {"ticket_id": billing, "queue": queue, "reason": "r"}
            )
            assert refused.is_error, queue
            assert "billing, engineering" in text_of(refused), text_of(refused)
        assert await state(settings, billing) == before
        moved = await _call(
            client,
            "escalate_ticket",
            {"ticket_id": billing, "queue": "Engineering ", "reason": "needs a developer"},
        )
        assert not moved.is_error, text_of(moved)
        assert moved.structured_content["ticket"]["queue"] == "engineering"
        back = await _call(
            client, "escalate_ticket", {"ticket_id": billing, "queue": "Billing", "reason": "r"}
        )
        assert back.structured_content["ticket"]["queue"] == "billing"
    stored = await _sql(settings, "SELECT queue FROM tickets WHERE id = :t", t=billing)
    assert stored[0][0] == "billing"
    async with Client(server_as(stdio_caller="anywhere", confirm_writes=[]), mode=mode) as client:
        refused = await _call(
            client, "escalate_ticket", {"ticket_id": billing, "queue": "nowhere", "reason": "r"}
        )
        assert refused.is_error
        assert "billing, engineering, onboarding, security, support" in text_of(refused)
    rows = await audit_rows(settings, tool="escalate_ticket")
    assert [r.detail for r in rows if r.outcome != "ok"] == ["unknown queue"] * 4


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("add_internal_note", {"note": "a\x00b"}),
        ("reply_to_customer", {"reply": "\x00" * 10_000}),
        ("assign_ticket", {"owner": "ana\x00"}),
        ("escalate_ticket", {"reason": "r\x00", "priority": "urgent"}),
        ("add_internal_note", {"note": "n", "idempotency_key": "k\x00"}),
        ("add_internal_note", {"ticket_id": "SUP-1\x00"}),
        ("search_tickets_v2", {"query": "refund\x00"}),
        ("get_ticket_status_v2", {"ticket_id": "SUP-1001\x00"}),
    ],
)
async def test_nul_is_an_invalid_argument_on_both_engines(
    settings: Settings, add_caller, server_as, mode: str, caplog, tool: str, arguments: dict
) -> None:
    """C33: any text argument holding U+0000 is an isError saying so, the same on both
    engines; nothing written; not an outage (no "unavailable", nothing at ERROR)."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    if tool not in ("search_tickets_v2",) and "ticket_id" not in arguments:
        arguments = {"ticket_id": billing, **arguments}
    if tool == "add_internal_note":
        arguments = {"note": "n", **arguments}
    caplog.set_level(logging.INFO)
    async with Client(server_as(stdio_caller="agent", confirm_writes=[]), mode=mode) as client:
        result = await _call(client, tool, arguments)
    assert result.is_error
    assert "NUL character (U+0000)" in text_of(result), text_of(result)
    assert "unavailable" not in text_of(result)
    assert await state(settings, billing) == before
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    rows = await audit_rows(settings, tool=tool)
    assert [r.detail for r in rows] == ["invalid arguments"]


async def test_control_characters_are_refused_and_tabs_kept(
    settings: Settings, add_caller, server_as
) -> None:
    """C33: an ANSI escape or another control character is refused like NUL; a note may
    hold tabs and line breaks."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    async with Client(server_as(stdio_caller="agent", confirm_writes=[])) as client:
        refused = await _call(
            client, "add_internal_note", {"ticket_id": billing, "note": "red \x1b[31m text"}
        )
        assert refused.is_error and "control character U+001B" in text_of(refused)
        kept = await _call(
            client, "add_internal_note", {"ticket_id": billing, "note": "line\n\tindented"}
        )
        assert not kept.is_error


async def test_owner_logins_and_blank_text_are_refused(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """Owners are logins of a documented alphabet (folded to lower case); blank notes,
    replies and reasons are refused; nothing written."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    async with Client(server_as(stdio_caller="agent", confirm_writes=[]), mode=mode) as client:
        for owner in ("ana maria", "\u202eana", "-ana", "ana;rm"):
            refused = await _call(client, "assign_ticket", {"ticket_id": billing, "owner": owner})
            assert refused.is_error and "is not a login" in text_of(refused), owner
        for tool, arguments in (
            ("add_internal_note", {"note": "   "}),
            ("reply_to_customer", {"reply": "\n\t "}),
            ("escalate_ticket", {"reason": " ", "priority": "urgent"}),
        ):
            refused = await _call(client, tool, {"ticket_id": billing, **arguments})
            assert refused.is_error and "is blank" in text_of(refused), tool
        assert await state(settings, billing) == before
        folded = await _call(client, "assign_ticket", {"ticket_id": billing, "owner": " A.Chen "})
        assert folded.structured_content["ticket"]["owner"] == "a.chen"


async def test_a_replay_of_a_confirmed_write_never_asks_again(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """C34: a reply with idempotency_key K, confirmed and written; the same call again
    returns the first result as a replay without asking the person, writes nothing."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    person = Person("accept")
    arguments = {"ticket_id": billing, "reply": "Refund sent.", "idempotency_key": "K-34"}
    async with Client(
        server_as(stdio_caller="agent"), mode=mode, elicitation_handler=person
    ) as client:
        first = await _call(client, "reply_to_customer", arguments)
        assert not first.is_error and len(person.asked) == 1
        after = await state(settings, billing)
        person.answer = "decline"  # were it asked again, it would say no
        again = await _call(client, "reply_to_customer", arguments)
        assert not again.is_error, text_of(again)
        assert again.structured_content == first.structured_content
        assert again.meta["dev.ticket-server/replay"] is True
        assert len(person.asked) == 1
    assert await state(settings, billing) == after


async def test_escalation_reason_is_kept_as_a_digest(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """C35: the audit row keeps the escalation reason as {sha256, length}."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    reason = "Customer SSN 078-05-1120 in thread"
    async with Client(server_as(stdio_caller="agent", confirm_writes=[]), mode=mode) as client:
        done = await _call(
            client,
            "escalate_ticket",
            {"ticket_id": billing, "priority": "urgent", "reason": reason},
        )
        assert not done.is_error
    (row,) = await audit_rows(settings, tool="escalate_ticket")
    assert "078-05-1120" not in row.arguments and "078-05-1120" not in (row.change or "")
    assert json.loads(row.arguments)["reason"] == {
        "sha256": hashlib.sha256(reason.encode()).hexdigest(),
        "length": len(reason),
    }


async def test_a_closed_ticket_takes_internal_notes_only(
    settings: Settings, add_caller, server_as, mode: str, caplog
) -> None:
    """C37: on a closed ticket a reply, an assignment and an escalation are isError naming
    the status; an internal note is written; nothing else changes. Routine refusals are
    logged below ERROR."""
    caplog.set_level(logging.INFO)
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    closed = await closed_in(settings, "billing")
    before = await state(settings, closed)
    async with Client(server_as(stdio_caller="agent", confirm_writes=[]), mode=mode) as client:
        for tool, arguments in (
            ("reply_to_customer", {"reply": "Hello again"}),
            ("assign_ticket", {"owner": "ana"}),
            ("escalate_ticket", {"priority": "urgent", "reason": "r"}),
        ):
            refused = await _call(client, tool, {"ticket_id": closed, **arguments})
            assert refused.is_error, tool
            assert "has status closed" in text_of(refused), text_of(refused)
            assert "internal notes only" in text_of(refused)
        assert await state(settings, closed) == before
        note = await _call(client, "add_internal_note", {"ticket_id": closed, "note": "FYI"})
        assert not note.is_error
    after = await state(settings, closed)
    assert after[0][:4] == before[0][:4] and after[1] == before[1] + 1
    rows = await audit_rows(settings, caller="agent")
    assert [r.detail for r in rows if r.tool in WRITE_TOOLS] == ["ticket closed"] * 3 + [None]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_writes_that_would_be_refused_are_refused_before_asking(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """C43: with the default policy (replies and closing confirmed), a close of a closed
    ticket, a reply outside the caller's write queues and one to a missing ticket are
    refused at once with the reason; the person is never asked."""
    await add_caller(
        "agent", scopes=AGENT_SCOPES, queues=["billing", "support"], write_queues=["billing"]
    )
    closed = await closed_in(settings, "billing")
    support = await ticket_in(settings, "support")
    person = Person("accept")
    async with Client(
        server_as(stdio_caller="agent"), mode=mode, elicitation_handler=person
    ) as client:
        again = await _call(client, "set_ticket_status", {"ticket_id": closed, "status": "closed"})
        assert again.is_error and "from closed to closed" in text_of(again)
        elsewhere = await _call(client, "reply_to_customer", {"ticket_id": support, "reply": "Hi"})
        assert elsewhere.is_error and "may write" in text_of(elsewhere)
        missing = await _call(
            client, "reply_to_customer", {"ticket_id": "SUP-99999", "reply": "Hi"}
        )
        assert missing.is_error and "No ticket SUP-99999" in text_of(missing)
    assert person.asked == []


async def test_closing_is_confirmed_by_a_status_policy(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """`--confirm set_ticket_status` confirms closing too (closing is a status change)."""
    await add_caller(
        "agent", scopes=AGENT_SCOPES, queues=["billing"], confirm_writes=["set_ticket_status"]
    )
    billing = await ticket_in(settings, "billing")
    person = Person("decline")
    async with Client(
        server_as(stdio_caller="agent"), mode=mode, elicitation_handler=person
    ) as client:
        refused = await _call(
            client, "set_ticket_status", {"ticket_id": billing, "status": "closed"}
        )
    assert refused.is_error and "did not confirm" in text_of(refused)
    assert len(person.asked) == 1 and f"Close {billing}?" in person.asked[0]
    assert "status " in person.asked[0] and "-> closed" in person.asked[0]


async def test_an_escalation_question_names_queue_priority_and_reason(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    await add_caller(
        "agent",
        scopes=AGENT_SCOPES,
        queues=["billing", "engineering"],
        confirm_writes=["escalate_ticket"],
    )
    billing = await ticket_in(settings, "billing")
    person = Person("accept")
    async with Client(
        server_as(stdio_caller="agent"), mode=mode, elicitation_handler=person
    ) as client:
        done = await _call(
            client,
            "escalate_ticket",
            {
                "ticket_id": billing,
                "queue": "engineering",
                "priority": "urgent",
                "reason": "outage",
            },
        )
        assert not done.is_error, text_of(done)
    (question,) = person.asked
    assert "queue billing -> engineering" in question and "-> urgent" in question
    assert "Reason: outage" in question


@pytest.mark.postgresql_only
async def test_one_key_on_twenty_tickets_at_once(settings: Settings, add_caller, server_as) -> None:
    """C48: PostgreSQL, 20 concurrent writes with one idempotency key on 20 different
    tickets: one write; 19 answers saying the key was already used; none "unavailable"."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    tickets = [
        r[0]
        for r in await _sql(
            settings,
            "SELECT id FROM tickets WHERE queue = 'billing' AND status <> 'closed' "
            "ORDER BY pk LIMIT 20",
        )
    ]
    server = server_as(
        stdio_caller="agent",
        confirm_writes=[],
        caller_concurrency=32,
        write_rate_limit="100000/minute",
        database_timeout=20.0,
    )
    async with Client(server) as client:
        results = await asyncio.gather(
            *(
                _call(
                    client,
                    "add_internal_note",
                    {"ticket_id": t, "note": "same key", "idempotency_key": "K-48"},
                )
                for t in tickets
            )
        )
    texts = [text_of(r) for r in results if r.is_error]
    assert len(texts) == 19, texts
    assert all("already used" in t for t in texts), texts
    notes = await _sql(settings, "SELECT count(*) FROM comments WHERE body = 'same key'")
    assert notes[0][0] == 1


@pytest.mark.parametrize("value", ["k" * 129, 12345, ""])
async def test_a_meta_key_that_cannot_be_used_is_refused(
    settings: Settings, add_caller, server_as, value: Any
) -> None:
    """A key in _meta that is too long, empty or not a string is refused with the reason,
    never dropped (a retry would then write twice)."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    async with Client(server_as(stdio_caller="agent", confirm_writes=[])) as client:
        refused = await _call(
            client,
            "add_internal_note",
            {"ticket_id": billing, "note": "n"},
            meta={"dev.ticket-server/idempotency-key": value},
        )
    assert refused.is_error and "dev.ticket-server/idempotency-key" in text_of(refused)
    assert await state(settings, billing) == before


async def test_every_audit_row_has_its_figures_and_every_refusal_a_detail(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """A written call's row has its result size and its whole duration (set after the
    call); every refusal has a detail (the "give a priority or a queue" one included)."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    async with Client(server_as(stdio_caller="agent", confirm_writes=[]), mode=mode) as client:
        written = await _call(client, "add_internal_note", {"ticket_id": billing, "note": "n"})
        empty = await _call(client, "escalate_ticket", {"ticket_id": billing, "reason": "r"})
        assert not written.is_error and empty.is_error
    rows = await audit_rows(settings, caller="agent")
    note = next(r for r in rows if r.tool == "add_internal_note")
    size = len(
        json.dumps(
            {
                "content": [{"type": "text", "text": text_of(written)}],
                "structuredContent": written.structured_content,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
    )
    assert note.change is not None and note.result_bytes == size
    assert note.duration_ms > 0
    refusal = next(r for r in rows if r.tool == "escalate_ticket")
    assert refusal.detail == "nothing to change" and refusal.result_bytes > 0


async def test_the_persons_time_does_not_count_against_the_call_deadline(
    settings: Settings, add_caller, server_as
) -> None:
    """Legacy: the call waits for the person's answer beyond the tool deadline (up to the
    confirmation's own expiry), then writes."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")

    async def slow_person(message, response_type, params, context):
        await asyncio.sleep(1.5)
        return ElicitResult(action="accept", content={"confirm": True})

    async with Client(
        server_as(stdio_caller="agent", tool_timeout=1.0),
        mode="legacy",
        elicitation_handler=slow_person,
    ) as client:
        done = await _call(client, "reply_to_customer", {"ticket_id": billing, "reply": "Later."})
    assert not done.is_error, text_of(done)
