"""The related-ticket tools over a real transport: a spawned HTTP server (bearer token,
2026-07-28), with the related toolset offered by setting: similar tickets, a link shown
from the other side, a bulk dry run confirmed by its plan_token."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from tests.tools.test_writes_transports import _count, open_ticket
from tests.transports.conftest import add_caller, start_http_server, stop


async def test_related_tools_over_http(db_path: Path, tmp_path: Path) -> None:
    lead = add_caller(db_path, "lead", scopes=("tickets:read", "tickets:write"))
    a, b = open_ticket(db_path, "billing"), open_ticket(db_path, "support")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_TOOLSETS='["read", "triage", "related"]',
        TICKET_SERVER_CONFIRM_WRITES="none",
    )
    try:
        async with Client(server.transport(lead), mode="2026-07-28") as client:
            similar = await client.call_tool("find_similar_tickets", {"ticket_id": "SUP-1096"})
            assert similar.is_error is False and similar.structured_content["tickets"]
            await client.call_tool(
                "link_tickets", {"ticket_id": a, "link": "caused_by", "other_ticket_id": b}
            )
            read = await client.call_tool("get_ticket", {"ticket_id": b, "fields": ["links"]})
            assert read.structured_content["links"][0]["type"] == "causes"
            dry = await client.call_tool(
                "bulk_update_tickets", {"ticket_ids": [a, b], "priority": "urgent"}
            )
            token = dry.structured_content["plan_token"]
            done = await client.call_tool(
                "bulk_update_tickets",
                {"priority": "urgent", "dry_run": False, "plan_token": token},
            )
            assert [t["id"] for t in done.structured_content["tickets"]] == [a, b]
    finally:
        stop(server.process)
    assert (
        _count(
            db_path, "SELECT count(*) FROM tickets WHERE priority = 'urgent' AND id IN (?, ?)", a, b
        )
        == 2
    )
