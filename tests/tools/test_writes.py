"""The write tools through the in-memory client, on SQLite and PostgreSQL, in both
protocol revisions: each tool's happy path, every refusal (nothing changes; an audit row
is left), idempotent retries, concurrent writers, confirmation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import call_any, text_of
from ticket_server.server import WRITE_TOOLS as DECLARED_WRITES
from ticket_server.settings import Settings

WRITE_TOOLS = {
    "add_internal_note",
    "reply_to_customer",
    "set_ticket_status",
    "assign_ticket",
    "escalate_ticket",
}
AGENT_SCOPES = ("tickets:read", "tickets:write")


async def _sql(settings: Settings, sql: str, **params: Any) -> list[Any]:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(settings.database_url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(text(sql), params)).all())
    finally:
        await engine.dispose()


async def ticket_in(settings: Settings, queue: str) -> str:
    """A ticket of ``queue`` still being worked on."""
    rows = await _sql(
        settings,
        "SELECT id FROM tickets WHERE queue = :queue AND status IN ('open', 'in_progress') "
        "ORDER BY pk LIMIT 1",
        queue=queue,
    )
    assert rows, f"the sample has no open {queue} ticket, which this test needs"
    return rows[0][0]


@pytest.fixture
async def closed_billing(settings: Settings) -> str:
    """A closed billing ticket of the sample: asserted to exist, so that no test's check
    of closed tickets can pass by having nothing to check."""
    rows = await _sql(
        settings,
        "SELECT id FROM tickets WHERE queue = 'billing' AND status = 'closed' ORDER BY pk LIMIT 1",
    )
    assert rows, "the sample has no closed billing ticket, which this test needs"
    return rows[0][0]


async def state(settings: Settings, ticket_id: str) -> tuple[Any, ...]:
    """Everything a write may change about a ticket."""
    ticket = await _sql(
        settings,
        "SELECT status, priority, owner, queue, version, updated_at FROM tickets WHERE id = :t",
        t=ticket_id,
    )
    comments = await _sql(
        settings, "SELECT count(*) FROM comments WHERE ticket_id = :t", t=ticket_id
    )
    events = await _sql(
        settings, "SELECT count(*) FROM ticket_events WHERE ticket_id = :t", t=ticket_id
    )
    keys = await _sql(settings, "SELECT count(*) FROM write_requests")
    return tuple(ticket[0]), comments[0][0], events[0][0], keys[0][0]


@pytest.fixture
async def agent(settings: Settings, add_caller, server_as):
    """A server whose caller reads and writes in billing only; no confirmation asked."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    # caller_concurrency: the 16-writer test sends 16 calls at once as this one caller.
    return server_as(
        stdio_caller="agent",
        tool_rate_limit="100000/minute",
        confirm_writes=[],
        caller_concurrency=32,
    )


async def test_write_tools_listed_only_with_the_scope(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    await add_caller("reader", queues=["billing"])
    await add_caller("writer", scopes=AGENT_SCOPES, queues=["billing"])
    async with Client(server_as(stdio_caller="reader"), mode=mode) as client:
        assert not WRITE_TOOLS & {t.name for t in await client.list_tools()}
        billing = await ticket_in(settings, "billing")
        before = await state(settings, billing)
        is_error, text = await call_any(
            client, "add_internal_note", {"ticket_id": billing, "note": "x"}
        )
        assert is_error and "Unknown tool" in text
        assert await state(settings, billing) == before
    async with Client(server_as(stdio_caller="writer"), mode=mode) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert set(tools) >= WRITE_TOOLS
        # Every tool that writes is named in the request-state hand-over (server.py).
        assert {n for n, t in tools.items() if t.annotations.readOnlyHint is False} == {
            t.name for t in DECLARED_WRITES
        }
        reply = tools["reply_to_customer"].annotations
        assert (
            reply.readOnlyHint,
            reply.destructiveHint,
            reply.idempotentHint,
            reply.openWorldHint,
        ) == (False, False, False, True)
        assert tools["add_internal_note"].annotations.openWorldHint is False
    async with Client(server_as(stdio_caller="writer", read_only=True), mode=mode) as client:
        assert not WRITE_TOOLS & {t.name for t in await client.list_tools()}
    rows = await audit_rows(settings, tool="add_internal_note")
    assert [r.outcome for r in rows] == ["denied"]


async def test_each_write_tool_happy_path(settings: Settings, agent, mode: str) -> None:
    billing = await ticket_in(settings, "billing")
    async with Client(agent, mode=mode) as client:
        note = await client.call_tool(
            "add_internal_note", {"ticket_id": billing, "note": "Checked the invoice."}
        )
        assert note.structured_content["visibility"] == "internal"
        v = note.structured_content["ticket"]["version"]
        reply = await client.call_tool(
            "reply_to_customer",
            {"ticket_id": billing, "reply": "We fixed it.", "expected_version": v},
        )
        assert reply.structured_content["visibility"] == "public"
        assert reply.structured_content["ticket"]["version"] == v + 1
        assigned = await client.call_tool("assign_ticket", {"ticket_id": billing, "owner": "ana"})
        assert assigned.structured_content["ticket"]["owner"] == "ana"
        unassigned = await client.call_tool("assign_ticket", {"ticket_id": billing, "owner": None})
        assert unassigned.structured_content["changes"] == [
            {"field": "owner", "old_value": "ana", "new_value": None}
        ]
        escalated = await client.call_tool(
            "escalate_ticket",
            {"ticket_id": billing, "priority": "urgent", "reason": "Customer is losing money."},
        )
        assert escalated.structured_content["ticket"]["priority"] == "urgent"
        status = (
            await client.call_tool("get_ticket", {"ticket_id": billing, "fields": ["status"]})
        ).structured_content["status"]
        target = "resolved" if status != "resolved" else "open"
        moved = await client.call_tool(
            "set_ticket_status", {"ticket_id": billing, "status": target}
        )
        assert moved.structured_content["ticket"]["status"] == target
    comments = await _sql(
        settings,
        "SELECT visibility, body FROM comments WHERE ticket_id = :t AND author = 'agent'"
        " ORDER BY pk",
        t=billing,
    )
    assert [tuple(c) for c in comments] == [
        ("internal", "Checked the invoice."),
        ("public", "We fixed it."),
        ("internal", "Escalation: Customer is losing money."),
    ]
    audited = await audit_rows(settings, caller="agent")
    writes = [r for r in audited if r.tool in WRITE_TOOLS]
    assert len(writes) == 6 and all(r.outcome == "ok" and r.change for r in writes)
    assert json.loads(writes[2].change)["after"] == {"owner": "ana"}


_SEARCH_TABLES = ("ticket_search_postings", "search_terms", "search_term_deltas")


async def _count_search_writes(settings: Settings) -> None:
    """Triggers that add a row to ``search_writes`` (table, op) for every row the server
    inserts, updates or deletes in the search tables, on its own connections."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(settings.database_url)
    sqlite = settings.database_url.startswith("sqlite")
    statements = ["CREATE TABLE search_writes (tab VARCHAR(32), op VARCHAR(8))"]
    if not sqlite:
        statements.append(
            "CREATE FUNCTION count_search_write() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN INSERT INTO search_writes VALUES (TG_TABLE_NAME, TG_OP); RETURN NULL; END $$"
        )
    for table in _SEARCH_TABLES:
        for op in ("INSERT", "UPDATE", "DELETE"):
            statements.append(
                f"CREATE TRIGGER count_{table}_{op} AFTER {op} ON {table} FOR EACH ROW "
                + (
                    f"BEGIN INSERT INTO search_writes VALUES ('{table}', '{op}'); END"
                    if sqlite
                    else "EXECUTE FUNCTION count_search_write()"
                )
            )
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def _search_writes(settings: Settings) -> dict[str, int]:
    """The rows counted since the last call, by table (and forgotten)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as conn:
            rows = await conn.execute(text("SELECT tab, count(*) FROM search_writes GROUP BY tab"))
            counted = {tab: n for tab, n in rows}
            await conn.execute(text("DELETE FROM search_writes"))
            return counted
    finally:
        await engine.dispose()


async def test_a_write_without_text_writes_no_search_row(settings: Settings, agent) -> None:
    """Issue 37: a status or owner change writes no search row (it moved every posting
    of the ticket, one per token, to its new updated_at); a note writes only its own
    words' counts, no posting. Counted by triggers on the search tables; the ticket is
    still found after, first among its equals by creation."""
    billing = await ticket_in(settings, "billing")
    tokens = await _sql(
        settings,
        "SELECT count(*) FROM ticket_search_postings p JOIN tickets t ON t.pk = p.ticket_pk "
        "WHERE t.id = :t",
        t=billing,
    )
    assert tokens[0][0] > 5  # what a status change rewrote before
    await _count_search_writes(settings)
    async with Client(agent) as client:
        for tool, arguments in [
            ("set_ticket_status", {"status": "waiting_on_customer"}),
            ("assign_ticket", {"owner": "ana"}),
        ]:
            done = await client.call_tool(tool, {"ticket_id": billing, **arguments})
            assert done.is_error is False, text_of(done)
            assert await _search_writes(settings) == {}, tool
        # a note (and an escalation's reason, a note too): its words' counts and the
        # total of comments, one row each, no posting
        await client.call_tool(
            "add_internal_note", {"ticket_id": billing, "note": "Checked the quetzal invoice."}
        )
        assert await _search_writes(settings) == {"search_term_deltas": 4}
        subject = (
            await client.call_tool("get_ticket", {"ticket_id": billing, "fields": ["subject"]})
        ).structured_content["subject"]["text"]
        found = await client.call_tool(
            "search_tickets_v2", {"query": subject, "queue": "billing", "limit": 50}
        )
        assert billing in [t["id"] for t in found.structured_content["tickets"]]


async def test_refusals_change_nothing_and_are_audited(
    settings: Settings, agent, mode: str, closed_billing: str
) -> None:
    billing = await ticket_in(settings, "billing")
    support = await ticket_in(settings, "support")
    async with Client(agent, mode=mode) as client:
        first = await client.call_tool(
            "add_internal_note", {"ticket_id": billing, "note": "a", "idempotency_key": "k1"}
        )
        version = first.structured_content["ticket"]["version"]
        before = await state(settings, billing)
        before_support = await state(settings, support)
        cases = [
            ("add_internal_note", {"ticket_id": support, "note": "x"}, "No ticket"),
            (
                "escalate_ticket",
                {"ticket_id": billing, "queue": "support", "reason": "r"},
                "may not write in queue",
            ),
            (
                "add_internal_note",
                {"ticket_id": billing, "note": "x", "expected_version": version - 1},
                f"now version {version}",
            ),
            (
                "add_internal_note",
                {"ticket_id": billing, "note": "other", "idempotency_key": "k1"},
                "already used",
            ),
            ("assign_ticket", {"ticket_id": billing, "owner": before[0][2]}, "already"),
            (
                "set_ticket_status",
                {"ticket_id": closed_billing, "status": "open"},
                "closed ticket is final",
            ),
        ]
        for tool, arguments, says in cases:
            result = await client.call_tool(tool, arguments, raise_on_error=False)
            assert result.is_error, (tool, arguments)
            assert says in text_of(result), text_of(result)
        assert await state(settings, billing) == before
        assert await state(settings, support) == before_support
        new_status = (
            await client.call_tool("get_ticket", {"ticket_id": billing, "fields": ["status"]})
        ).structured_content["status"]
        illegal = await client.call_tool(
            "set_ticket_status", {"ticket_id": billing, "status": "new"}, raise_on_error=False
        )
        assert illegal.is_error and f"from {new_status} to new" in text_of(illegal)
        assert "allowed next statuses" in text_of(illegal)
        assert await state(settings, billing) == before
    rows = [r for r in await audit_rows(settings, caller="agent") if r.tool in WRITE_TOOLS]
    assert [r.outcome for r in rows] == ["ok"] + ["tool_error"] * (len(cases) + 1)
    assert [r.detail for r in rows][1:4] == [
        "ticket not found",
        "queue not writable",
        "stale version",
    ]


async def test_audit_keeps_a_digest_of_note_and_reply_text_not_the_text(
    settings: Settings, agent, mode: str
) -> None:
    """A note's or a reply's body is kept in the audit as SHA-256 and length (the comment
    row holds the text), for a write and for a refusal alike."""
    import hashlib

    billing = await ticket_in(settings, "billing")
    support = await ticket_in(settings, "support")
    note, reply = "Customer's card ends 4242, call back", "Your refund is on its way — ünïcode"
    async with Client(agent, mode=mode) as client:
        await client.call_tool("add_internal_note", {"ticket_id": billing, "note": note})
        await client.call_tool("reply_to_customer", {"ticket_id": billing, "reply": reply})
        refused = await client.call_tool(
            "add_internal_note", {"ticket_id": support, "note": note}, raise_on_error=False
        )
        assert refused.is_error
    rows = [r for r in await audit_rows(settings, caller="agent") if r.tool in WRITE_TOOLS]
    assert [r.outcome for r in rows] == ["ok", "ok", "tool_error"]
    for row, field, text in zip(rows, ["note", "reply", "note"], [note, reply, note], strict=True):
        assert "4242" not in row.arguments and "refund" not in row.arguments
        kept = json.loads(row.arguments)[field]
        assert kept == {"sha256": hashlib.sha256(text.encode()).hexdigest(), "length": len(text)}
    bodies = await _sql(
        settings, "SELECT body FROM comments WHERE ticket_id = :t AND author = 'agent'", t=billing
    )
    assert sorted(b[0] for b in bodies) == sorted([note, reply])


async def test_retry_after_a_lost_response_returns_the_first_result(
    settings: Settings, agent, mode: str
) -> None:
    """The first call commits but its answer is lost; the retry with the same key and
    arguments returns that result, marked as a replay, and writes nothing."""
    billing = await ticket_in(settings, "billing")
    arguments = {"ticket_id": billing, "reply": "Refund issued.", "idempotency_key": "retry-1"}
    async with Client(agent, mode=mode) as client:
        first = await client.call_tool("reply_to_customer", arguments)
        after_first = await state(settings, billing)
        again = await client.call_tool("reply_to_customer", arguments)
        assert again.structured_content == first.structured_content
        assert (again.meta or {}).get("dev.ticket-server/replay") is True
        assert not (first.meta or {}).get("dev.ticket-server/replay")
        assert await state(settings, billing) == after_first


async def test_write_rate_limit_is_its_own_and_refuses_in_the_same_shape(
    settings: Settings,
    add_caller,
    server_as,
    mode: str,
) -> None:
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    server = server_as(stdio_caller="agent", write_rate_limit="2/minute", confirm_writes=[])
    async with Client(server, mode=mode) as client:
        for _ in range(2):
            await client.call_tool("add_internal_note", {"ticket_id": billing, "note": "n"})
        before = await state(settings, billing)
        refused = await client.call_tool(
            "add_internal_note", {"ticket_id": billing, "note": "n"}, raise_on_error=False
        )
        assert refused.is_error and "Rate limit reached for add_internal_note" in text_of(refused)
        assert refused.meta["dev.ticket-server/rate-limit"]["limit"] == "2 per 1 minute"
        assert await state(settings, billing) == before
        # Reads are not counted against the write limit.
        read = await client.call_tool("get_ticket_status_v2", {"ticket_id": billing})
        assert not read.is_error
    rows = await audit_rows(settings, tool="add_internal_note")
    assert [r.outcome for r in rows] == ["ok", "ok", "rate_limited"]


async def test_16_concurrent_writers_lose_no_update(settings: Settings, agent) -> None:
    billing = await ticket_in(settings, "billing")
    start = (await state(settings, billing))[0][4]
    async with Client(agent) as client:
        results = await asyncio.gather(
            *(
                client.call_tool(
                    "add_internal_note",
                    {"ticket_id": billing, "note": f"writer {i}"},
                    raise_on_error=False,
                )
                for i in range(16)
            )
        )
    accepted = [r for r in results if not r.is_error]
    assert len(accepted) == 16, [text_of(r) for r in results if r.is_error]
    versions = sorted(r.structured_content["ticket"]["version"] for r in accepted)
    assert versions == list(range(start + 1, start + 17))
    notes = await _sql(
        settings, "SELECT body FROM comments WHERE ticket_id = :t AND author = 'agent'", t=billing
    )
    assert sorted(n[0] for n in notes) == sorted(f"writer {i}" for i in range(16))
    assert (await state(settings, billing))[0][4] == start + 16


@pytest.mark.postgresql_only
async def test_a_writer_waiting_on_one_ticket_does_not_hold_up_another_ticket(
    settings: Settings,
    add_caller,
    server_as,
) -> None:
    """PostgreSQL: this process's writers take turns per ticket, not all together: while
    another session holds ticket A's row lock, a write to A waits for it and a write to
    B goes through; A's write then lands too."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing", "support"])
    a, b = await ticket_in(settings, "billing"), await ticket_in(settings, "support")
    server = server_as(stdio_caller="agent", confirm_writes=[], database_timeout=20.0)
    holder = create_async_engine(settings.database_url)
    try:
        async with Client(server) as client, holder.connect() as locking:
            await locking.execute(text("SELECT id FROM tickets WHERE id = :a FOR UPDATE"), {"a": a})
            waiting = asyncio.create_task(
                client.call_tool("add_internal_note", {"ticket_id": a, "note": "A"})
            )
            for _ in range(1000):  # until A's write waits on the row lock (pg_locks is live)
                waiters = (
                    await locking.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted"))
                ).scalar()
                if waiters:
                    break
                await asyncio.sleep(0.01)
            assert waiters, "A's write never reached the row lock"
            other = await client.call_tool("add_internal_note", {"ticket_id": b, "note": "B"})
            assert not other.is_error and not waiting.done()
            await locking.rollback()
            done = await waiting
            assert not done.is_error
    finally:
        await holder.dispose()
    notes = await _sql(
        settings, "SELECT ticket_id, body FROM comments WHERE author = 'agent' ORDER BY pk"
    )
    assert [tuple(n) for n in notes] == [(b, "B"), (a, "A")]


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
async def test_reply_confirmation(
    settings: Settings, add_caller, server_as, mode: str, action: str
) -> None:
    """Legacy: elicitation/create; 2026-07-28: the input_required round trip with sealed
    request state. Declined or cancelled: nothing written, audited."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    asked: list[str] = []

    async def person(message, response_type, params, context):
        asked.append(message)
        field = next(iter(params.requestedSchema["properties"]))
        return ElicitResult(action=action, content={field: True} if action == "accept" else None)

    before = await state(settings, billing)
    async with Client(
        server_as(stdio_caller="agent"), mode=mode, elicitation_handler=person
    ) as client:
        result = await client.call_tool(
            "reply_to_customer", {"ticket_id": billing, "reply": "Hello"}, raise_on_error=False
        )
    assert asked and "Hello" in asked[0]
    rows = await audit_rows(settings, tool="reply_to_customer")
    if action == "accept":
        assert not result.is_error
        assert json.loads(rows[-1].change)["confirmation"] == "accepted"
    else:
        assert result.is_error and "nothing was changed" in text_of(result)
        after = await state(settings, billing)
        assert after[:3] == before[:3]  # the ticket, its comments and its history
        # On 2026-07-28 the declined request state is spent (one write_requests row).
        assert after[3] == before[3] + (mode != "legacy")
        assert rows[-1].outcome == "tool_error" and action in rows[-1].detail


async def test_client_that_cannot_confirm_is_refused(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """No elicitation capability (or the 2026-07-28 revision, where the input request is
    not implemented yet): an isError saying so, nothing written."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    async with Client(server_as(stdio_caller="agent"), mode=mode) as client:
        result = await client.call_tool(
            "reply_to_customer", {"ticket_id": billing, "reply": "Hello"}, raise_on_error=False
        )
        assert result.is_error and "needs a person's confirmation" in text_of(result)
        note = await client.call_tool(
            "add_internal_note", {"ticket_id": billing, "note": "not confirmed"}
        )
        assert not note.is_error
    after = await state(settings, billing)
    assert after[1] == before[1] + 1  # only the note


async def _asked(client: Client, ticket_id: str) -> Any:
    from mcp.types import InputRequiredResult

    first = await client.session.call_tool(
        "reply_to_customer", {"ticket_id": ticket_id, "reply": "Hello"}, allow_input_required=True
    )
    assert isinstance(first, InputRequiredResult)
    assert set(first.input_requests) == {"confirm"}
    return first


async def _answer(client: Client, ticket_id: str, state: str, reply: str = "Hello") -> Any:
    from mcp.types import ElicitResult as WireElicitResult

    return await client.session.call_tool(
        "reply_to_customer",
        {"ticket_id": ticket_id, "reply": reply},
        input_responses={"confirm": WireElicitResult(action="accept", content={"confirm": True})},
        request_state=state,
        allow_input_required=True,
    )


async def _yes(message, response_type, params, context):
    return ElicitResult(action="accept", content={"confirm": True})


async def test_confirmation_state_replayed_or_tampered_is_refused(
    settings: Settings,
    add_caller,
    server_as,
    monkeypatch,
) -> None:
    """2026-07-28: the sealed request state is single-use, and bound to the request. A
    state that fails the SDK's verification (altered, echoed with other arguments,
    past the seal's own expiry) is refused by the tool: an isError saying why, nothing
    changed, an audit row."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    async with Client(
        server_as(stdio_caller="agent"), mode="2026-07-28", elicitation_handler=_yes
    ) as client:
        first = await _asked(client, billing)
        done = await _answer(client, billing, first.request_state)
        assert not done.is_error
        after = await state(settings, billing)
        replayed = await _answer(client, billing, first.request_state)
        assert replayed.is_error and "already used" in text_of(replayed)
        second = await _asked(client, billing)
        tampered = second.request_state[:-4] + (
            "AAAA" if not second.request_state.endswith("AAAA") else "BBBB"
        )
        refused = [
            await _answer(client, billing, tampered),
            await _answer(client, billing, second.request_state, reply="Another text"),
            await _answer(client, billing, "not a sealed state"),
        ]
        import mcp.server.request_state as sealing

        real_time = sealing.time.time
        monkeypatch.setattr(
            sealing.time, "time", lambda: real_time() + 3600
        )  # past the seal's expiry
        refused.append(await _answer(client, billing, second.request_state))
        monkeypatch.undo()
        for result in refused:
            assert result.is_error
            assert text_of(result).startswith("The request state is not valid"), text_of(result)
            assert "nothing was changed" in text_of(result)
        assert await state(settings, billing) == after
        # The state itself was never spent by the refusals: the person can still confirm it.
        late = await _answer(client, billing, second.request_state)
        assert not late.is_error
    rows = await audit_rows(settings, tool="reply_to_customer")
    details = [r.detail for r in rows]
    assert "confirmation replayed" in details
    invalid = [r for r in rows if r.detail == "confirmation state invalid (reply_to_customer)"]
    assert len(invalid) == 4 and all(
        r.outcome == "tool_error" and r.caller == "agent" for r in invalid
    )


@pytest.mark.parametrize("answer", ["decline", "cancel"])
async def test_declined_confirmation_cannot_be_replayed_to_write(
    settings: Settings,
    add_caller,
    server_as,
    mode: str,
    answer: str,
) -> None:
    """A person's "no" spends the confirmation: on 2026-07-28 the same request state sent
    again with an "accept" is refused; on legacy the next call asks afresh. Nothing is
    written until a person accepts, and each step is audited."""
    from mcp.types import ElicitResult as WireElicitResult

    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    answers = [answer, "accept"]

    async def person(message, response_type, params, context):
        action = answers.pop(0)
        return ElicitResult(
            action=action, content={"confirm": True} if action == "accept" else None
        )

    arguments = {"ticket_id": billing, "reply": "Hello"}
    async with Client(
        server_as(stdio_caller="agent"), mode=mode, elicitation_handler=person
    ) as client:
        if mode == "legacy":
            no = await client.call_tool("reply_to_customer", arguments, raise_on_error=False)
            assert no.is_error and f"did not confirm ({answer})" in text_of(no)
            assert await state(settings, billing) == before
            yes = await client.call_tool("reply_to_customer", arguments, raise_on_error=False)
            assert not yes.is_error and answers == []  # asked again, not carried over
        else:
            first = await _asked(client, billing)
            no = await client.session.call_tool(
                "reply_to_customer",
                arguments,
                request_state=first.request_state,
                allow_input_required=True,
                input_responses={"confirm": WireElicitResult(action=answer)},
            )
            assert no.is_error and f"did not confirm ({answer})" in text_of(no)
            replayed = await _answer(client, billing, first.request_state)
            assert replayed.is_error and "already used" in text_of(replayed)
            assert (await state(settings, billing))[:3] == before[
                :3
            ]  # no comment, event or version change
    said = f"confirmation {answer}{'d' if answer == 'decline' else 'led'}"
    rows = await audit_rows(settings, tool="reply_to_customer")
    details = [r.detail.split(" (")[0] if r.detail else r.detail for r in rows]
    if mode == "legacy":
        assert details == [said, None] and rows[1].change is not None
    else:
        assert details == ["confirmation requested", said, "confirmation replayed"]
        assert all(r.change is None for r in rows)


async def test_confirmation_state_expired_is_refused(
    settings: Settings, add_caller, server_as, monkeypatch
) -> None:
    from ticket_server.tools import writes

    monkeypatch.setattr(writes, "CONFIRM_SECONDS", -1)
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    async with Client(
        server_as(stdio_caller="agent"), mode="2026-07-28", elicitation_handler=_yes
    ) as client:
        first = await _asked(client, billing)
        late = await _answer(client, billing, first.request_state)
        assert late.is_error and "expired" in text_of(late)
    assert await state(settings, billing) == before


def test_confirmation_state_binds_what_it_seals() -> None:
    from ticket_server.access.sealing import SignedClaims as ConfirmationState

    states = ConfirmationState(lambda: b"k" * 32)
    token = states.seal({"c": "agent", "k": "SUP-1"})
    assert states.unseal(token) == {"c": "agent", "k": "SUP-1"}
    _, _, tag = token.rpartition(".")
    forged = ConfirmationState(lambda: b"x" * 32).seal({"c": "intruder", "k": "SUP-1"})
    assert states.unseal(forged) is None
    assert states.unseal(forged.rpartition(".")[0] + "." + tag) is None
    assert states.unseal("garbage") is None


async def test_audit_prints_the_story_of_a_ticket(settings: Settings, agent, db_path) -> None:
    """`ticket-server audit --ticket ID`: the writes, refusals and history of one ticket."""
    import os
    import subprocess
    import sys

    billing = await ticket_in(settings, "billing")
    async with Client(agent) as client:
        await client.call_tool(
            "add_internal_note",
            {"ticket_id": billing, "note": "Story note", "idempotency_key": "story-1"},
        )
        await client.call_tool("assign_ticket", {"ticket_id": billing, "owner": "zoe"})
        await client.call_tool(
            "set_ticket_status", {"ticket_id": billing, "status": "new"}, raise_on_error=False
        )
    env = {**os.environ, "TICKET_SERVER_DATABASE_URL": settings.database_url}
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "ticket_server", "audit", "--ticket", billing.lower()],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "internal note" in out and "'Story note'" in out
    assert "called add_internal_note: ok [version" in out and "key story-1" in out
    assert "owner:" in out and "-> zoe" in out
    assert "called set_ticket_status: tool_error (illegal status transition)" in out
    lines = out.splitlines()
    assert lines.index(next(line for line in lines if "Story note" in line)) < lines.index(
        next(line for line in lines if "-> zoe" in line)
    )


async def test_idempotency_key_in_meta_as_the_client_kit_sends_it(
    settings: Settings, agent, mode: str
) -> None:
    billing = await ticket_in(settings, "billing")
    meta = {"dev.ticket-server/idempotency-key": "kit-1"}
    async with Client(agent, mode=mode) as client:
        first = await client.call_tool(
            "assign_ticket", {"ticket_id": billing, "owner": "kit"}, meta=meta
        )
        after = await state(settings, billing)
        again = await client.call_tool(
            "assign_ticket", {"ticket_id": billing, "owner": "kit"}, meta=meta
        )
        assert again.structured_content == first.structured_content
        assert again.meta["dev.ticket-server/replay"] is True
        assert await state(settings, billing) == after


async def test_caller_writes_only_in_its_write_queues(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """Reads billing and support, writes billing only: a support ticket is readable but
    not writable, and a billing ticket cannot be moved to support."""
    await add_caller(
        "split", scopes=AGENT_SCOPES, queues=["billing", "support"], write_queues=["billing"]
    )
    billing, support = await ticket_in(settings, "billing"), await ticket_in(settings, "support")
    before = await state(settings, billing), await state(settings, support)
    async with Client(server_as(stdio_caller="split", confirm_writes=[]), mode=mode) as client:
        read = await client.call_tool("get_ticket", {"ticket_id": support, "fields": ["status"]})
        assert not read.is_error
        note = await client.call_tool(
            "add_internal_note", {"ticket_id": support, "note": "x"}, raise_on_error=False
        )
        assert note.is_error and "may write" in text_of(note)
        moved = await client.call_tool(
            "escalate_ticket",
            {"ticket_id": billing, "queue": "support", "reason": "r"},
            raise_on_error=False,
        )
        assert moved.is_error and "may not write in queue 'support'" in text_of(moved)
        assert (await state(settings, billing), await state(settings, support)) == before
        ok = await client.call_tool("add_internal_note", {"ticket_id": billing, "note": "fine"})
        assert not ok.is_error


async def test_a_callers_own_confirmation_policy_replaces_the_deployments(
    settings: Settings,
    add_caller,
    server_as,
    mode: str,
) -> None:
    """A trusted bot confirms nothing; another caller must confirm even its notes."""
    await add_caller("bot", scopes=AGENT_SCOPES, queues=["billing"], confirm_writes=[])
    await add_caller(
        "careful", scopes=AGENT_SCOPES, queues=["billing"], confirm_writes=["add_internal_note"]
    )
    billing = await ticket_in(settings, "billing")
    async with Client(server_as(stdio_caller="bot"), mode=mode) as client:
        reply = await client.call_tool(
            "reply_to_customer", {"ticket_id": billing, "reply": "Done."}
        )
        assert not reply.is_error
    async with Client(server_as(stdio_caller="careful"), mode=mode) as client:
        note = await client.call_tool(
            "add_internal_note", {"ticket_id": billing, "note": "n"}, raise_on_error=False
        )
        assert note.is_error and "needs a person's confirmation" in text_of(note)
    rows = await audit_rows(settings, tool="reply_to_customer")
    assert json.loads(rows[-1].change)["confirmation"] == "not required"


def test_a_misspelt_confirmation_policy_is_refused_not_ignored() -> None:
    """A typo must not silently turn a confirmation off: settings and callers refuse it."""
    import pydantic

    from ticket_server.access.callers import CallerError, validate

    with pytest.raises(pydantic.ValidationError):
        Settings(confirm_writes=["reply_to_customers"])
    with pytest.raises(CallerError, match="reply_to_customers"):
        validate("bot", ["tickets:write"], None, [], ["reply_to_customers"])
    validate("bot", ["tickets:write"], None, [], ["reply_to_customer", "close_ticket"])


async def test_confirmation_asked_by_one_replica_is_accepted_by_another(
    settings: Settings,
    add_caller,
    server_as,
) -> None:
    """With TICKET_SERVER_SECRET shared, the retry carrying the person's answer may
    reach another server process (stateless HTTP replicas); the state is still single-use."""
    from pydantic import SecretStr

    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    shared = {"stdio_caller": "agent", "secret": SecretStr("replica secret")}
    async with (
        Client(server_as(**shared), mode="2026-07-28", elicitation_handler=_yes) as one,
        Client(server_as(**shared), mode="2026-07-28", elicitation_handler=_yes) as two,
    ):
        first = await _asked(one, billing)
        done = await _answer(two, billing, first.request_state)
        assert not done.is_error
        replayed = await _answer(one, billing, first.request_state)
        assert replayed.is_error and "already used" in text_of(replayed)
