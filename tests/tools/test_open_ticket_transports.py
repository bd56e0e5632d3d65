"""``open_ticket`` over real transports: a spawned HTTP server (bearer token, 2026-07-28)
and a spawned stdio server (legacy): the new ticket comes back with its requester's text
labelled, a queue outside the caller's is refused, the audit row names the ticket."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcp import Client

from tests.helpers import text_of
from tests.transports.conftest import add_caller, start_http_server, stop

OPEN = {
    "subject": "Cannot download the March invoice",
    "body": "The download button does nothing.",
    "queue": "billing",
    "requester_email": "lea.brandt@acme.example",
    "requester_name": "Lea Brandt",
    "customer_id": "CUS-1000",
}


def _rows(db_path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(sql, params).fetchall()


async def test_open_ticket_over_http(db_path: Path, tmp_path: Path) -> None:
    token = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(server.transport(token), mode="2026-07-28") as client:
            opened = await client.call_tool("open_ticket", OPEN)
            elsewhere = await client.call_tool("open_ticket", {**OPEN, "queue": "support"})
    finally:
        stop(server.process)
    assert opened.is_error is False, text_of(opened)
    ticket = opened.structured_content["ticket"]
    assert ticket["subject"]["untrusted"] is True and ticket["requester"]["name"] == "Lea Brandt"
    assert elsewhere.is_error and "may not write in queue 'support'" in text_of(elsewhere)
    assert _rows(db_path, "SELECT queue, requester_id FROM tickets WHERE id = ?", ticket["id"]) == [
        ("billing", ticket["requester"]["id"])
    ]
    audited = _rows(
        db_path,
        "SELECT outcome FROM audit_events WHERE tool = 'open_ticket' AND caller = 'writer' "
        "ORDER BY pk",
    )
    assert audited == [("ok",), ("tool_error",)]


async def test_open_ticket_over_stdio(db_path: Path) -> None:
    from tests.transports.test_stdio import stdio_params

    token = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    async with Client(stdio_params(db_path, TICKET_SERVER_TOKEN=token), mode="legacy") as client:
        opened = await client.call_tool("open_ticket", {**OPEN, "idempotency_key": "o-1"})
        again = await client.call_tool("open_ticket", {**OPEN, "idempotency_key": "o-1"})
    assert opened.is_error is False, text_of(opened)
    assert again.structured_content == opened.structured_content
    new_id = opened.structured_content["ticket"]["id"]
    assert _rows(db_path, "SELECT count(*) FROM tickets WHERE id = ?", new_id) == [(1,)]
    assert _rows(
        db_path, "SELECT count(*) FROM requesters WHERE email = ?", OPEN["requester_email"]
    ) == [(1,)]
