"""Issue 16, item 13: the deprecated substring search is bounded on SQLite (it scans every
subject; PostgreSQL serves it from the pg_trgm index): a search past its own budget is
stopped and answered as too broad, not as an outage, and other reads go on."""

from __future__ import annotations

import logging

import pytest
from fastmcp import Client

from tests.helpers import text_of
from ticket_server.server import build_runtime, build_server
from ticket_server.tickets import repository


@pytest.mark.sqlite_only
async def test_a_search_past_its_budget_is_stopped_and_said_to_be_too_broad(
    settings, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(repository, "SUBSTRING_SEARCH_SECONDS", 1e-9)
    runtime = build_runtime(settings)
    async with Client(build_server(runtime)) as client:
        with caplog.at_level(logging.INFO):
            # Found nowhere, so every subject is scanned (a frequent one ends early).
            stopped = await client.call_tool(
                "search_tickets", {"query": "qzxv"}, raise_on_error=False
            )
        assert stopped.is_error and "took too long and was stopped" in text_of(stopped)
        assert (
            await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        ).is_error is False
    assert not [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.startswith("ticket_server")
    ]
    assert "ticket_server_database_errors_total 0.0" in runtime.metrics.render().decode()
