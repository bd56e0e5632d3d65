"""Resource reads and prompts are held to what a tool call is held to (``reads.py``): a
rate-limit allowance of their own, and the caller's concurrency cap shared with its tool
calls. Before, `tickets://attachment/{id}` could be read without limit while
`get_attachment` was refused from its third call (a review's finding)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp import Client
from mcp import MCPError

from tests.helpers import text_of
from ticket_server.settings import Settings

TICKET_URI = "tickets://ticket/SUP-4412"


async def test_reads_spend_an_allowance_of_their_own(server_as: Any, add_caller: Any) -> None:
    """At 2 a minute: two reads of the ticket resource answer, the third is refused in
    words a model can act on (with when to retry), as get_ticket's third call is; a
    prompt and get_ticket each keep their own allowance."""
    await add_caller("reader", tool_rate_limit="2/minute")
    async with Client(server_as(stdio_caller="reader")) as client:
        for _ in range(2):
            assert await client.read_resource(TICKET_URI)
        with pytest.raises(MCPError) as refused:
            await client.read_resource(TICKET_URI)
        assert refused.value.error.code == -32000
        message = refused.value.error.message
        assert message.startswith("Rate limit reached for resources/read ticket")
        assert "Nothing was done; retry in" in message
        assert refused.value.error.data["dev.ticket-server/rate-limit"]["retry_after_seconds"] >= 1
        for _ in range(2):
            read = await client.call_tool("get_ticket", {"ticket_id": "SUP-4412"})
            assert read.is_error is False
        third = await client.call_tool(
            "get_ticket", {"ticket_id": "SUP-4412"}, raise_on_error=False
        )
        assert third.is_error and "Rate limit reached for get_ticket" in text_of(third)
        prompt = await client.get_prompt("summarize_ticket", {"ticket_id": "SUP-4412"})
        assert prompt.messages


@pytest.mark.postgresql_only
async def test_reads_and_calls_share_the_callers_cap(
    server_as: Any, add_caller: Any, settings: Settings
) -> None:
    """With TICKET_SERVER_CALLER_CONCURRENCY=3 (and a share of 3), three reads of one
    caller held running on a locked tickets table (PostgreSQL shows each one waiting)
    leave no room for a fourth read nor for a tool call; all three are answered once it
    is released."""
    from tests.postgres import lock_waiters, wait_for_lock_waiters
    from tests.transports.conftest import database_locked

    await add_caller("busy")
    server = server_as(
        stdio_caller="busy",
        caller_concurrency=3,
        caller_share=3,  # all three at work (on the lock), none waiting for a turn
        database_timeout=60.0,
        tool_timeout=60.0,
    )
    async with Client(server) as client:
        assert await client.read_resource(TICKET_URI)  # the caller is cached now
        with database_locked(settings.database_url):
            held = []
            for running in (1, 2, 3):
                held.append(asyncio.create_task(client.read_resource(TICKET_URI)))
                await asyncio.to_thread(wait_for_lock_waiters, settings.database_url, running)
            with pytest.raises(MCPError, match="already has 3 requests running"):
                await asyncio.wait_for(client.read_resource(TICKET_URI), 10)
            call = await asyncio.wait_for(
                client.call_tool(
                    "get_ticket_status_v2", {"ticket_id": "SUP-4412"}, raise_on_error=False
                ),
                10,
            )
            assert call.is_error and "already has 3 calls running" in text_of(call)
            assert lock_waiters(settings.database_url) == 3
        answered = await asyncio.gather(*held)
    assert all(answered)


async def test_every_read_is_audited_as_a_call_is(
    server_as: Any, add_caller: Any, settings: Settings
) -> None:
    """A resource read or prompt leaves one audit row, as a tool call does, refused or
    not: named like its allowance, with the URI and the template's parameters (so
    `audit --ticket` finds reads of the ticket), the outcome and the size sent."""
    import json

    from tests.access.conftest import audit_rows
    from ticket_server.access.callers import open_store
    from ticket_server.admin.reports import ticket_story

    await add_caller("reader", tool_rate_limit="2/minute")
    async with Client(server_as(stdio_caller="reader")) as client:
        for _ in range(2):
            await client.read_resource(TICKET_URI)
        with pytest.raises(MCPError):
            await client.read_resource(TICKET_URI)
        await client.get_prompt("summarize_ticket", {"ticket_id": "SUP-4412"})
        with pytest.raises(MCPError, match="not found"):
            await client.read_resource("tickets://nothing/1")
    rows = await audit_rows(settings, caller="reader")
    seen = sorted((r.tool, r.outcome, r.detail) for r in rows)
    assert seen == sorted(
        [
            ("resources/read ticket", "ok", None),
            ("resources/read ticket", "ok", None),
            ("resources/read ticket", "rate_limited", "rate limit reached"),
            ("prompts/get summarize_ticket", "ok", None),
            ("resources/read", "tool_error", "unknown resource"),
        ]
    ), seen
    read = next(r for r in rows if r.tool == "resources/read ticket" and r.outcome == "ok")
    assert json.loads(read.arguments) == {"uri": TICKET_URI, "id": "SUP-4412"}
    assert read.result_bytes > 100
    store = open_store(settings)
    try:
        story = await ticket_story(store, "SUP-4412")
    finally:
        await store.aclose()
    assert sum("called resources/read ticket: ok" in what for _, _, what, _ in story) == 2


async def test_a_prompt_argument_no_text_takes_is_refused_as_a_tools_is(
    server: Any, mode: str, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A prompt's argument holding a NUL, a lone surrogate or a control character is
    refused before the prompt runs, in the words a tool's refusal uses (-32602, naming the
    argument), and audited as invalid arguments: a review found PostgreSQL's refusal of the
    NUL answered as "The ticket database is unavailable" (logged at ERROR), and SQLite's
    of the surrogate as Python's codec error."""
    import logging

    from tests.access.conftest import audit_rows

    caplog.set_level(logging.INFO)
    sent = [
        ("summarize_ticket", {"ticket_id": "SUP-4412\x00"}, "'ticket_id' holds a NUL"),
        ("draft_reply", {"ticket_id": "\ud800"}, "'ticket_id' contains a lone UTF-16"),
        ("triage_queue", {"queue": "billing", "owner": "\x1b[31m"}, "'owner' holds the control"),
    ]
    async with Client(server, mode=mode) as client:
        for name, arguments, said in sent:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, arguments)
            message = refused.value.error.message
            assert refused.value.error.code == -32602, message
            assert message.startswith(f"Invalid arguments for {name}: {said}"), message
            assert "unavailable" not in message and "codec" not in message, message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    rows = await audit_rows(settings)
    refusals = [(r.tool, r.outcome, r.detail) for r in rows if r.tool.startswith("prompts/get")]
    assert refusals == [
        (f"prompts/get {name}", "tool_error", "invalid arguments") for name, _, _ in sent
    ], refusals


async def test_an_unexpected_error_in_a_prompt_is_masked_as_in_a_tool(
    server: Any, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server masks the details of an unexpected error (``mask_error_details``): a
    tool's and a resource's say only that it failed, and so does a prompt's now. FastMCP
    words a prompt's error with the exception's text whatever that setting says, so a
    driver's error (its SQL) reached the client (a review's finding)."""
    from ticket_server.tools import prompts

    async def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("SELECT tickets.body FROM tickets WHERE tickets.id = 'SUP-4412'")

    monkeypatch.setattr(prompts, "read_ticket", broken)
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError) as failed:
            await client.get_prompt("summarize_ticket", {"ticket_id": "SUP-4412"})
        assert failed.value.error.message == "Error rendering prompt 'summarize_ticket'"
        with pytest.raises(MCPError) as unknown:  # a fixable error keeps its words
            await client.get_prompt("triage_queue", {"queue": "no-such-queue"})
        assert unknown.value.error.message == "No open tickets in a queue named 'no-such-queue'."


async def test_a_read_refused_for_want_of_the_callers_table_is_audited(
    server_as: Any, add_caller: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read or prompt refused because the callers table did not answer leaves its audit
    row (`callers table unavailable`), as a tool call refused so does: a review found
    neither recorded."""
    from tests.access.conftest import audit_rows
    from ticket_server.access.callers import CallerStore, RegistryUnavailable

    await add_caller("reader")
    server = server_as(stdio_caller="reader", caller_cache_seconds=0)
    async with Client(server) as client:
        assert await client.read_resource(TICKET_URI)

        async def down(*_: Any, **__: Any) -> None:
            raise RegistryUnavailable("callers table")

        monkeypatch.setattr(CallerStore, "by_name", down)
        with pytest.raises(MCPError, match="database is unavailable"):
            await client.read_resource(TICKET_URI)
        with pytest.raises(MCPError, match="database is unavailable"):
            await client.get_prompt("summarize_ticket", {"ticket_id": "SUP-4412"})
        monkeypatch.undo()
    rows = await audit_rows(settings)
    seen = [(r.tool, r.outcome, r.detail) for r in rows if r.tool.split(" ")[0] != "tools/call"]
    assert seen == [
        ("resources/read ticket", "ok", None),
        ("resources/read ticket", "tool_error", "callers table unavailable"),
        ("prompts/get summarize_ticket", "tool_error", "callers table unavailable"),
    ], seen


async def test_the_audit_log_line_names_the_method(
    server_as: Any, add_caller: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The audit's stderr line is named by the request's method: a resource read is not
    logged as a tools/call."""
    import logging

    await add_caller("reader")
    with caplog.at_level(logging.INFO, logger="ticket_server.audit"):
        async with Client(server_as(stdio_caller="reader")) as client:
            await client.read_resource(TICKET_URI)
            await client.get_prompt("summarize_ticket", {"ticket_id": "SUP-4412"})
            await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            with pytest.raises(MCPError):
                await client.get_prompt("no_such_prompt", {})
    named = [(r.getMessage(), r.audit["tool"]) for r in caplog.records if hasattr(r, "audit")]
    assert named == [
        ("resources/read", "resources/read ticket"),
        ("prompts/get", "prompts/get summarize_ticket"),
        ("tools/call", "get_ticket_status_v2"),
        ("prompts/get", "prompts/get"),
    ], named
    unknown = [r.audit["detail"] for r in caplog.records if hasattr(r, "audit")][-1]
    assert unknown == "unknown prompt"
