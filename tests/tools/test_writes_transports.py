"""The write tools over real transports: HTTP (a spawned server process, bearer tokens)
in both protocol revisions, and a spawned stdio server: the same scope, queue,
confirmation, idempotency, read-only and audit rules as in memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mcp import Client

from tests.access.conftest import support_and_billing_ids
from tests.helpers import call_any, text_of
from tests.transports.conftest import add_caller, start_http_server, stop


def _count(db_path: Path, sql: str, *params: object) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(sql, params).fetchone()[0]


def open_ticket(db_path: Path, queue: str = "billing") -> str:
    """The oldest ticket of ``queue`` still being worked on (a closed one takes notes only)."""
    with sqlite3.connect(db_path) as conn:
        return conn.execute(
            "SELECT id FROM tickets WHERE queue = ? AND status IN ('open', 'in_progress') "
            "ORDER BY pk LIMIT 1",
            (queue,),
        ).fetchone()[0]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_writes_over_http(db_path: Path, tmp_path: Path, mode: str) -> None:
    writer = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    reader = add_caller(db_path, "reader", queues=["billing"])
    support, billing = support_and_billing_ids(db_path)
    billing = open_ticket(db_path)
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(server.transport(reader), mode=mode) as client:
            assert "add_internal_note" not in {t.name for t in (await client.list_tools()).tools}
        async with Client(server.transport(writer), mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"add_internal_note", "reply_to_customer", "escalate_ticket"} <= names
            note = await client.call_tool(
                "add_internal_note", {"ticket_id": billing, "note": "over http"}
            )
            assert note.is_error is False and note.structured_content["visibility"] == "internal"
            elsewhere = await client.call_tool(
                "add_internal_note", {"ticket_id": support, "note": "no"}
            )
            assert elsewhere.is_error and "No ticket" in text_of(elsewhere)
            reply = await client.call_tool(
                "reply_to_customer", {"ticket_id": billing, "reply": "hi"}
            )
            assert reply.is_error and "needs a person's confirmation" in text_of(reply)
    finally:
        stop(server.process)
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM comments WHERE author = 'writer' AND ticket_id = ?",
            billing,
        )
        == 1
    )
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM comments WHERE author = 'writer' AND ticket_id = ?",
            support,
        )
        == 0
    )
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM audit_events WHERE caller = 'writer' AND change IS NOT NULL",
        )
        == 1
    )
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM audit_events WHERE caller = 'writer' AND outcome = 'tool_error'",
        )
        == 2
    )


async def test_writes_over_stdio_and_read_only_mode(db_path: Path) -> None:
    from tests.transports.test_stdio import stdio_params

    token = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    _, billing = support_and_billing_ids(db_path)
    async with Client(stdio_params(db_path, TICKET_SERVER_TOKEN=token)) as client:
        note = await client.call_tool(
            "add_internal_note",
            {"ticket_id": billing, "note": "over stdio", "idempotency_key": "stdio-1"},
        )
        assert note.is_error is False
        again = await client.call_tool(
            "add_internal_note",
            {"ticket_id": billing, "note": "over stdio", "idempotency_key": "stdio-1"},
        )
        assert again.structured_content == note.structured_content
        assert again.meta["dev.ticket-server/replay"] is True
    async with Client(
        stdio_params(db_path, TICKET_SERVER_TOKEN=token, TICKET_SERVER_READ_ONLY="true")
    ) as client:
        assert not {"add_internal_note", "reply_to_customer"} & {
            t.name for t in (await client.list_tools()).tools
        }
        refused = await call_any(
            client, "add_internal_note", {"ticket_id": billing, "note": "read-only"}
        )
        assert refused == (True, "Unknown tool: 'add_internal_note'")
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM comments WHERE author = 'writer' AND ticket_id = ?",
            billing,
        )
        == 1
    )


async def test_invalid_confirmation_state_over_http_is_refused_and_audited(
    db_path: Path, tmp_path: Path
) -> None:
    """2026-07-28 over HTTP with bearer tokens: a confirmation's request state that is
    altered, or echoed by another caller (FastMCP's seal binds the token's principal),
    is an isError saying so, changes nothing, and leaves an audit row."""
    from mcp.types import ElicitResult, InputRequiredResult

    async def never(context, params):
        raise AssertionError("the server asks through input_required on this revision")

    writer = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    other = add_caller(
        db_path, "other", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    billing = open_ticket(db_path)
    arguments = {"ticket_id": billing, "reply": "over http"}
    yes = {"confirm": ElicitResult(action="accept", content={"confirm": True})}
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(
            server.transport(writer), mode="2026-07-28", elicitation_callback=never
        ) as client:
            asked = await client.session.call_tool(
                "reply_to_customer", arguments, allow_input_required=True
            )
            assert isinstance(asked, InputRequiredResult)
            state = asked.request_state
            tampered = await client.session.call_tool(
                "reply_to_customer",
                arguments,
                input_responses=yes,
                allow_input_required=True,
                request_state=state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB"),
            )
            assert tampered.is_error and text_of(tampered).startswith(
                "The request state is not valid"
            )
        async with Client(
            server.transport(other), mode="2026-07-28", elicitation_callback=never
        ) as client:
            stolen = await client.session.call_tool(
                "reply_to_customer",
                arguments,
                input_responses=yes,
                request_state=state,
                allow_input_required=True,
            )
            assert stolen.is_error and text_of(stolen).startswith("The request state is not valid")
    finally:
        stop(server.process)
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM comments WHERE ticket_id = ? AND body = 'over http'",
            billing,
        )
        == 0
    )
    assert (
        _count(
            db_path,
            "SELECT count(*) FROM audit_events WHERE tool = 'reply_to_customer' AND outcome = "
            "'tool_error' AND detail LIKE 'confirmation state invalid%'",
        )
        == 2
    )
