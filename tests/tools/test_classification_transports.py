"""Tags and custom fields over real transports: one spawned stdio server and one HTTP
server (bearer token, 2026-07-28): the same tools, queues and refusals as in memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcp import Client

from tests.access.conftest import support_and_billing_ids
from tests.helpers import text_of
from tests.tools.test_writes_transports import open_ticket
from tests.transports.conftest import add_caller, start_http_server, stop


def _tags(db_path: Path, ticket_id: str) -> list[str]:
    with sqlite3.connect(db_path) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT g.name FROM ticket_tags t JOIN tags g ON g.id = t.tag_id "
                "JOIN tickets k ON k.pk = t.ticket_pk WHERE k.id = ? ORDER BY g.name",
                (ticket_id,),
            )
        ]


async def test_tags_and_fields_over_stdio(db_path: Path) -> None:
    from tests.transports.test_stdio import stdio_params

    token = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    billing = open_ticket(db_path)
    async with Client(stdio_params(db_path, TICKET_SERVER_TOKEN=token)) as client:
        tagged = await client.call_tool(
            "update_ticket_tags", {"ticket_id": billing, "add": ["refund"]}
        )
        assert tagged.is_error is False and "refund" in tagged.structured_content["tags"]
        wrong = await client.call_tool(
            "set_ticket_fields", {"ticket_id": billing, "fields": {"renewal_risk": "yes"}}
        )
        assert wrong.is_error and "is a boolean" in text_of(wrong)
        read = await client.call_tool(
            "get_ticket", {"ticket_id": billing, "fields": ["tags", "custom_fields"]}
        )
        assert read.structured_content["tags"] == tagged.structured_content["tags"]
    assert "refund" in _tags(db_path, billing)


async def test_tags_over_http(db_path: Path, tmp_path: Path) -> None:
    writer = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    support, _ = support_and_billing_ids(db_path)
    billing = open_ticket(db_path)
    before = _tags(db_path, support)
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(server.transport(writer), mode="2026-07-28") as client:
            done = await client.call_tool(
                "update_ticket_tags", {"ticket_id": billing, "add": ["outage"]}
            )
            assert done.is_error is False and "outage" in done.structured_content["tags"]
            elsewhere = await client.call_tool(
                "update_ticket_tags", {"ticket_id": support, "add": ["outage"]}
            )
            assert elsewhere.is_error and "No ticket" in text_of(elsewhere)
            found = await client.call_tool(
                "search_tickets_v2", {"tags": ["outage"], "sort": "newest", "limit": 50}
            )
            assert billing in {t["id"] for t in found.structured_content["tickets"]}
    finally:
        stop(server.process)
    assert "outage" in _tags(db_path, billing) and _tags(db_path, support) == before
