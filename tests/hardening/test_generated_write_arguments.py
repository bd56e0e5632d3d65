"""Generated bad input for the write tools (Hypothesis), as for the read tools in
test_generated_arguments.py: every call is a valid result or a readable, bounded
isError, never a protocol error, the masked fallback or an internal detail."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hardening.conftest import profile
from tests.hardening.support import BackgroundClients
from tests.hardening.test_generated_arguments import arguments_for, check_result
from tests.helpers import create_caller
from ticket_server.server import build_server
from ticket_server.settings import Settings

WRITE_TOOLS = [
    "add_internal_note",
    "reply_to_customer",
    "set_ticket_status",
    "assign_ticket",
    "escalate_ticket",
]


@pytest.mark.parametrize("tool", WRITE_TOOLS)
def test_generated_write_arguments_answer_sensibly(
    settings: Settings, tool: str, backend: str
) -> None:
    asyncio.run(create_caller(settings.database_url, "writer", ("tickets:read", "tickets:write")))
    server = build_server(
        settings.model_copy(
            update={
                "stdio_caller": "writer",
                "write_rate_limit": "100000/minute",
                "confirm_writes": [],
            }
        )
    )
    with BackgroundClients(server) as bg:
        listed = {t.name: t for t in bg.run(bg.clients["legacy"].list_tools())}
        assert set(WRITE_TOOLS) <= set(listed)
        strategy = arguments_for(listed[tool].inputSchema)

        @profile(0.2 if backend == "sqlite" else 0.05)
        @given(arguments=strategy, modern_revision=st.booleans())
        def run(arguments: dict[str, Any], modern_revision: bool) -> None:
            result = bg.call("2026-07-28" if modern_revision else "legacy", tool, arguments)
            check_result(result, tool, arguments)

        run()
        after = bg.call(
            "legacy", "add_internal_note", {"ticket_id": "SUP-4412", "note": "still serving"}
        )
        assert after.is_error is False
