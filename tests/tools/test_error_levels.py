"""Log levels of tool errors: ERROR means an operator should look (the database is down,
a bug); a mistake the model can fix by itself (unknown id, invalid argument, stale
cursor) is logged below ERROR."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastmcp import Client

from tests.helpers import text_of
from ticket_server.server import build_server

pytestmark = pytest.mark.sqlite_only


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


async def test_model_fixable_errors_below_error_and_an_outage_at_error(
    server, settings, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """C24: 20 unknown ids, invalid arguments, a bad cursor and a rate-limit refusal are
    not ERROR; the database made unavailable then is."""
    caplog.set_level(logging.DEBUG)
    async with Client(server) as client:
        for n in range(20):
            result = await client.call_tool(
                "get_ticket_status_v2", {"ticket_id": f"SUP-{90000 + n}"}, raise_on_error=False
            )
            assert result.is_error is True and "No ticket with id" in text_of(result)
        fixable = [
            ("get_ticket_status_v2", {"ticket_id": 12}),  # invalid argument (type)
            ("search_tickets_v2", {"query": "invoice", "limit": 500}),  # invalid argument (bound)
            ("search_tickets_v2", {"query": "invoice", "cursor": "not-a-cursor"}),  # bad cursor
            ("search_tickets_v2", {"query": "invoice", "nonsense": True}),  # unknown argument
        ]
        for tool, arguments in fixable:
            result = await client.call_tool(tool, arguments, raise_on_error=False)
            assert result.is_error is True, (tool, arguments)
        seen = [
            r
            for r in caplog.records
            if r.name.startswith("fastmcp") and "get_ticket_status_v2" in r.getMessage()
        ]
        assert seen, "FastMCP logs each failed call; the level is what this test is about"
        assert errors(caplog) == []

        limited = build_server(settings.model_copy(update={"tool_rate_limit": "2/minute"}))
        async with Client(limited) as other:
            answers = [
                await other.call_tool(
                    "get_ticket_status_v2", {"ticket_id": "SUP-4412"}, raise_on_error=False
                )
                for _ in range(3)
            ]
        assert answers[-1].is_error is True and "Rate limit" in text_of(answers[-1])
        assert errors(caplog) == []

        db_path.write_bytes(b"this is not a database" * 100)
        caplog.clear()
        broken = await client.call_tool(
            "get_ticket_status_v2", {"ticket_id": "SUP-4412"}, raise_on_error=False
        )
        assert broken.is_error is True and "unavailable" in text_of(broken)
        # The ticket database, or the callers registry in the same file when the caller's
        # cached lookup has expired: either way the outage is logged at ERROR.
        outage = ("ticket database unavailable", "callers registry unavailable")
        assert any(o in e for e in errors(caplog) for o in outage), errors(caplog)


async def test_missing_or_foreign_resources_and_prompts_below_error(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    """C24 for resources and prompts: a ticket or customer URI that is missing, or in a
    queue the caller may not read, and a prompt for such a ticket, are answered as missing
    (the same answer either way) and logged below ERROR; the read is still logged."""
    from mcp.shared.exceptions import MCPError

    from tests.helpers import create_caller

    await create_caller(settings.database_url, "billing", queues=["billing"])
    caplog.set_level(logging.DEBUG)
    async with Client(
        build_server(settings.model_copy(update={"stdio_caller": "billing"}))
    ) as client:
        answers = []
        # SUP-1042 and CUS-1250's only ticket are in support, outside the caller's queues.
        for uri in (
            "tickets://ticket/SUP-0000001",
            "tickets://ticket/SUP-1042",
            "tickets://customer/CUS-0",
            "tickets://customer/CUS-1250",
        ):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            error = caught.value.error
            answers.append((error.code, error.message.replace(uri, "URI"), error.data))
            assert error.data == {"uri": uri}
        assert len({(code, message) for code, message, _ in answers}) == 1, answers
        for ticket_id in ("SUP-0000001", "SUP-1042"):
            with pytest.raises(MCPError):
                await client.get_prompt("summarize_ticket", {"ticket_id": ticket_id})
    logged = [
        r for r in caplog.records if r.name.startswith("fastmcp") and "tickets://" in r.getMessage()
    ]
    assert logged, "FastMCP logs each failed read; the level is what this test is about"
    assert errors(caplog) == []


def test_fixable_resource_and_prompt_errors_are_logged_without_a_traceback(db_path: Path) -> None:
    """C24's log lines as a served process writes them (stdio): a missing ticket's resource
    read and prompt are one INFO line each naming the error, without a traceback, and a
    5,000-character URI is not copied whole into the log."""
    import json

    from tests.transports.conftest import stop
    from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio

    raw = RawStdio(db_path)
    requests = [
        ("resources/read", {"uri": "tickets://ticket/SUP-0000001"}),
        ("resources/read", {"uri": "tickets://ticket/" + "X" * 5000}),
        ("prompts/get", {"name": "summarize_ticket", "arguments": {"ticket_id": "SUP-0000001"}}),
    ]
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        for n, (method, params) in enumerate(requests, start=2):
            raw.send({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
            assert "error" in raw.read_until_id(n)
    finally:
        raw.close()
        stop(raw.process)
    lines = [json.loads(line) for line in raw.stderr().splitlines() if line.startswith("{")]
    failed = [
        line
        for line in lines
        if line["logger"] == "fastmcp.server.server"
        and line["message"].startswith(("Error reading resource", "Error rendering prompt"))
    ]
    assert len(failed) == len(requests), failed
    for line in failed:
        assert line["level"] == "INFO" and "exception" not in line, line
        assert "Traceback" not in json.dumps(line) and len(json.dumps(line)) < 1_000
    assert [line["error"].split(":")[0] for line in failed] == [
        "ResourceMissing",
        "ResourceMissing",
        "PromptError",
    ]
