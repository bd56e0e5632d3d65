"""Issue 16, item 12: an argument the database cannot take is the caller's error, not an
outage: a model-readable isError naming the argument, no ERROR traceback in the log, and
the database-error metric unchanged."""

from __future__ import annotations

import logging

from fastmcp import Client

from tests.helpers import assert_no_leak, text_of
from ticket_server.server import build_runtime, build_server

CASES = [
    (
        "search_tickets_v2",
        {"updated_after": "0001-01-01T00:00:00+14:00"},
        "'updated_after' must be",
    ),
    (
        "search_tickets_v2",
        {"updated_after": "9999-12-31T23:59:59-14:00"},
        "'updated_after' must be",
    ),
    ("search_tickets", {"query": "x" * 1_000_000}, "characters of text"),
    (
        "search_tickets",
        {"query": "refund " * 100},
        "'query' must be a string of at most 500 characters",
    ),
    (
        "search_tickets_v2",
        {"query": "refund " * 100},
        "'query' must be a string of at most 500 characters",
    ),
    ("get_ticket_status", {"ticket_id": "SUP-" + "9" * 5000}, "No ticket with id"),
]


async def test_unusable_values_answer_an_argument_error_not_unavailable(
    settings, mode: str, caplog
) -> None:
    runtime = build_runtime(settings)
    async with Client(build_server(runtime), mode=mode) as client:
        with caplog.at_level(logging.INFO):
            for tool, arguments, expected in CASES:
                result = await client.call_tool(tool, arguments, raise_on_error=False)
                text = text_of(result)
                assert result.is_error and expected in text, (tool, text[:200])
                assert "unavailable" not in text
                assert_no_leak(text)
    tracebacks = [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.exc_info and r.name.startswith("ticket_server")
    ]
    assert tracebacks == []
    assert "ticket_server_database_errors_total 0.0" in runtime.metrics.render().decode()
