"""`ticket-server db reindex`: a comment written by a server older than revision 0007
while a newer one already served (a rolling upgrade) has no search text, so a search of
the conversation misses it; the command gives it one, counts its words, and finds nothing
to do the second time (issue 13, item 2). SQLite and PostgreSQL, through the real
command."""

from __future__ import annotations

from fastmcp import Client

from ticket_server.server import build_server
from ticket_server.settings import Settings
from tests.helpers import column, scalar
from tests.test_operator_cli import run

# What a revision-0006 server inserts: every column it knows, none of the search text.
OLD_SERVER_COMMENT = """INSERT INTO comments (ticket_id, author, author_type, visibility, body, created_at)
VALUES ('SUP-4412', 'r.mehta', 'agent', 'internal', 'Courier Zanzibarx lost the parcel', '2026-11-01 10:00:00')"""


async def _found(settings: Settings) -> list[str]:
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("search_tickets_v2", {"query": "zanzibarx", "search_in": "conversation"})
    return [t["id"] for t in result.structured_content["tickets"]]


async def test_reindex_makes_an_older_servers_comment_searchable(settings: Settings) -> None:
    url = settings.database_url
    total_before = scalar(url, "SELECT comments FROM search_terms WHERE term = ''")
    column(url, OLD_SERVER_COMMENT)
    assert await _found(settings) == []

    first = run(url, "db", "reindex")
    assert first.returncode == 0, first.stderr
    assert "gave search text to 1 comments" in first.stderr and first.stdout == ""
    assert await _found(settings) == ["SUP-4412"]
    assert scalar(url, "SELECT comments FROM search_terms WHERE term = 'zanzibarx'") == "1"
    assert int(scalar(url, "SELECT comments FROM search_terms WHERE term = ''")) == int(total_before) + 1

    again = run(url, "db", "reindex")
    assert again.returncode == 0 and "gave search text to 0 comments" in again.stderr
    assert scalar(url, "SELECT comments FROM search_terms WHERE term = 'zanzibarx'") == "1"
    assert int(scalar(url, "SELECT comments FROM search_terms WHERE term = ''")) == int(total_before) + 1
