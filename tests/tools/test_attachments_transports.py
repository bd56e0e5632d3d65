"""Attachments over real transports: a spawned HTTP server (bearer token, 2026-07-28)
and a spawned stdio server (legacy): a note with files, read back byte for byte through
the resource template and as image content through get_attachment."""

from __future__ import annotations

import base64
from pathlib import Path

from mcp import Client

from tests.tools.test_writes_transports import _count, open_ticket
from tests.transports.conftest import add_caller, start_http_server, stop
from ticket_server.admin.sample_files import sample_csv, sample_png


def _files() -> list[dict[str, str]]:
    return [
        {"name": "screen.png", "content_base64": base64.b64encode(sample_png()).decode()},
        {"name": "export.csv", "content_base64": base64.b64encode(sample_csv()).decode()},
    ]


async def _note_and_read_back(client: Client, ticket: str) -> None:
    note = await client.call_tool(
        "add_internal_note", {"ticket_id": ticket, "note": "files", "attachments": _files()}
    )
    assert note.is_error is False, note
    png, csv = note.structured_content["attachments"]
    assert (png["media_type"], csv["media_type"]) == ("image/png", "text/csv")
    for file, data in ((png, sample_png()), (csv, sample_csv())):
        read = await client.read_resource(f"tickets://attachment/{file['id']}")
        (content,) = read.contents
        assert base64.b64decode(content.blob) == data and content.mime_type == file["media_type"]
    image = await client.call_tool("get_attachment", {"attachment_id": png["id"]})
    assert image.content[1].type == "image"
    assert base64.b64decode(image.content[1].data) == sample_png()


async def test_attachments_over_http(db_path: Path, tmp_path: Path) -> None:
    writer = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    billing = open_ticket(db_path)
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(server.transport(writer), mode="2026-07-28") as client:
            await _note_and_read_back(client, billing)
    finally:
        stop(server.process)
    assert _count(db_path, "SELECT count(*) FROM attachments WHERE uploader = 'writer'") == 2


async def test_attachments_over_stdio(db_path: Path) -> None:
    from tests.transports.test_stdio import stdio_params

    token = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    billing = open_ticket(db_path)
    async with Client(stdio_params(db_path, TICKET_SERVER_TOKEN=token), mode="legacy") as client:
        await _note_and_read_back(client, billing)
    assert _count(db_path, "SELECT count(*) FROM attachments WHERE uploader = 'writer'") == 2
