"""Confirmation over real transports (C30): with the default settings a reply and closing
a ticket ask the person, over HTTP in both revisions with ``mcp.Client`` and
``fastmcp.Client``, and over stdio; accept writes once, decline writes nothing, and
each call leaves its audit row. The question names what will change."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import text_of
from tests.tools.test_writes_transports import open_ticket
from tests.transports.conftest import add_caller, start_http_server, stop

WRITER = ("tickets:read", "tickets:write")


def _rows(db_path: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(sql, params).fetchall()


def _tickets(db_path: Path) -> tuple[str, str]:
    """Two billing tickets still being worked on: one to reply to, one to close."""
    rows = _rows(
        db_path,
        "SELECT id FROM tickets WHERE queue = 'billing' AND status IN ('open', 'in_progress') "
        "ORDER BY pk LIMIT 2",
    )
    return rows[0][0], rows[1][0]


class Person:
    """Answers each confirmation with the next of ``answers`` and keeps the questions."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def answer(self, message: str, schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        self.asked.append((message, schema))
        action = self.answers.pop(0)
        if action == "accept":
            return "accept", {"confirm": True}
        if action == "no":  # accepted the form, answered false
            return "accept", {"confirm": False}
        return action, None

    def for_mcp(self):  # an mcp.Client elicitation_callback
        from mcp.types import ElicitResult

        async def callback(context, params):
            action, content = self.answer(params.message, params.requested_schema)
            return ElicitResult(action=action, content=content)

        return callback

    def for_fastmcp(self):  # a fastmcp.Client elicitation_handler
        from fastmcp.client.elicitation import ElicitResult

        async def handler(message, response_type, params, context):
            action, content = self.answer(message, params.requested_schema)
            return ElicitResult(action=action, content=content)

        return handler


async def _story(call, reply_to: str, close: str) -> list[tuple[bool, str]]:
    """Accept, then decline, a reply and a close: (isError, text) of each."""
    results = []
    for tool, arguments in (
        ("reply_to_customer", {"ticket_id": reply_to, "reply": "Refund sent today."}),
        ("reply_to_customer", {"ticket_id": reply_to, "reply": "Declined text."}),
        ("set_ticket_status", {"ticket_id": close, "status": "closed"}),
    ):
        results.append(await call(tool, arguments))
    return results


def _check(
    db_path: Path, person: Person, results: list[tuple[bool, str]], reply_to: str, close: str
):
    # accept, decline, and the close: "no" (confirm false)
    assert [r[0] for r in results] == [False, True, True], results
    assert "nothing was changed" in results[1][1] and "nothing was changed" in results[2][1]
    assert len(person.asked) == 3 and person.answers == []
    for _, schema in person.asked:  # one form on both revisions
        assert list(schema["properties"]) == ["confirm"]
    assert "Refund sent today." in person.asked[0][0] and reply_to in person.asked[0][0]
    assert f"Close {close}?" in person.asked[2][0] and "-> closed" in person.asked[2][0]
    replies = _rows(
        db_path, "SELECT body FROM comments WHERE ticket_id = ? AND author = 'writer'", reply_to
    )
    assert replies == [("Refund sent today.",)]
    assert _rows(db_path, "SELECT status FROM tickets WHERE id = ?", close)[0][0] != "closed"
    audited = _rows(
        db_path,
        "SELECT tool, outcome, detail, change IS NOT NULL FROM audit_events "
        "WHERE caller = 'writer' AND tool IN ('reply_to_customer', 'set_ticket_status') "
        "AND (detail IS NULL OR detail NOT LIKE 'confirmation requested%') ORDER BY pk",
    )
    assert audited == [
        ("reply_to_customer", "ok", None, 1),
        ("reply_to_customer", "tool_error", "confirmation declined (reply_to_customer)", 0),
        ("set_ticket_status", "tool_error", "confirmation declined (close_ticket)", 0),
    ]


@pytest.mark.parametrize("kind", ["mcp", "fastmcp"])
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_confirmation_over_http_with_both_clients(
    db_path: Path, tmp_path: Path, mode: str, kind: str
) -> None:
    """C30: HTTP, default settings, a client with an elicitation callback (``mcp.Client``
    and ``fastmcp.Client``, legacy and 2026-07-28): the person is asked; accept writes
    once, decline writes nothing; both audited."""
    token = add_caller(db_path, "writer", scopes=WRITER, queues=["billing"])
    reply_to, close = _tickets(db_path)
    person = Person("accept", "decline", "no")
    server = start_http_server(db_path, tmp_path)
    try:
        if kind == "mcp":
            from mcp import Client

            async with Client(
                server.transport(token), mode=mode, elicitation_callback=person.for_mcp()
            ) as client:

                async def call(tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
                    result = await client.call_tool(tool, arguments)
                    return bool(result.is_error), text_of(result)

                results = await _story(call, reply_to, close)
        else:
            from fastmcp import Client as FastClient
            from fastmcp.client.transports import StreamableHttpTransport

            transport = StreamableHttpTransport(
                server.url, headers={"Authorization": f"Bearer {token}"}
            )
            async with FastClient(
                transport, mode=mode, elicitation_handler=person.for_fastmcp()
            ) as client:

                async def call(tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
                    result = await client.call_tool(tool, arguments, raise_on_error=False)
                    return result.is_error, text_of(result)

                results = await _story(call, reply_to, close)
    finally:
        stop(server.process)
    _check(db_path, person, results, reply_to, close)


async def test_confirmation_over_stdio(db_path: Path) -> None:
    """C30 over stdio (the legacy revision, elicitation on the same pipe)."""
    from mcp import Client

    from tests.transports.test_stdio import stdio_params

    token = add_caller(db_path, "writer", scopes=WRITER, queues=["billing"])
    reply_to, close = _tickets(db_path)
    person = Person("accept", "decline", "no")
    async with Client(
        stdio_params(db_path, TICKET_SERVER_TOKEN=token), elicitation_callback=person.for_mcp()
    ) as client:

        async def call(tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
            result = await client.call_tool(tool, arguments)
            return bool(result.is_error), text_of(result)

        results = await _story(call, reply_to, close)
    _check(db_path, person, results, reply_to, close)


async def test_legacy_http_without_a_stream_is_told_how(db_path: Path, tmp_path: Path) -> None:
    """C30: a legacy HTTP session whose client declares elicitation but accepts only JSON
    cannot carry the question: an isError saying what to send instead (never "Error
    calling tool"), and nothing written."""
    import httpx2 as httpx

    token = add_caller(db_path, "writer", scopes=WRITER, queues=["billing"])
    reply_to = open_ticket(db_path)
    server = start_http_server(db_path, tmp_path)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    try:
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            opened = await http.post(
                server.url,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"elicitation": {}},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                },
            )
            session = {
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-06-18",
            }
            await http.post(
                server.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=session,
            )
            answer = await http.post(
                server.url,
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {
                        "name": "reply_to_customer",
                        "arguments": {"ticket_id": reply_to, "reply": "JSON only"},
                    },
                },
                headers=session,
            )
    finally:
        stop(server.process)
    assert answer.headers["content-type"].startswith("application/json")
    result = answer.json()["result"]
    assert result["isError"] is True
    assert "text/event-stream" in result["content"][0]["text"]
    assert _rows(db_path, "SELECT count(*) FROM comments WHERE body = 'JSON only'") == [(0,)]
