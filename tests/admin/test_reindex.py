"""`ticket-server db reindex`: a comment written by a server older than revision 0007
while a newer one already served (a rolling upgrade) has no search text, so a search of
the conversation misses it; the command gives it one, counts its words, and finds nothing
to do the second time (issue 13, item 2). SQLite and PostgreSQL, through the real
command."""

from __future__ import annotations

from fastmcp import Client

from tests.helpers import column, scalar
from tests.test_operator_cli import run
from ticket_server.server import build_server
from ticket_server.settings import Settings

# What a revision-0006 server inserts: every column it knows, none of the search text.
OLD_SERVER_COMMENT = """INSERT INTO comments (ticket_id, author, author_type, visibility, body, created_at)
VALUES ('SUP-4412', 'r.mehta', 'agent', 'internal', 'Courier Zanzibarx lost the parcel', '2026-11-01 10:00:00')"""


async def _found(settings: Settings) -> list[str]:
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(
            "search_tickets_v2", {"query": "zanzibarx", "search_in": "conversation"}
        )
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
    assert (
        int(scalar(url, "SELECT comments FROM search_terms WHERE term = ''"))
        == int(total_before) + 1
    )

    again = run(url, "db", "reindex")
    assert again.returncode == 0 and "gave search text to 0 comments" in again.stderr
    assert scalar(url, "SELECT comments FROM search_terms WHERE term = 'zanzibarx'") == "1"
    assert (
        int(scalar(url, "SELECT comments FROM search_terms WHERE term = ''"))
        == int(total_before) + 1
    )


# What a revision-0007 server inserts (`db seed`): the ticket with its search text and
# its words counted, no search postings.
OLD_SERVER_TICKET = """INSERT INTO tickets (id, subject, body, status, priority, owner, queue, customer,
created_at, updated_at, search_subject, search_body) VALUES ('SUP-9900001', 'Quetzalx printer jams',
'It jams', 'open', 'low', NULL, 'support', 'Acme Logistics', '2026-11-01 10:00:00', '2026-11-01 10:00:00',
' quetzalx printer jam ', ' it jam ')"""
OLD_SERVER_COUNT = "INSERT INTO search_terms (term, tickets, comments) VALUES ('quetzalx', 1, 0)"


async def test_reindex_posts_an_older_servers_ticket(settings: Settings) -> None:
    async def found() -> list[str]:
        async with Client(build_server(settings)) as client:
            result = await client.call_tool("search_tickets_v2", {"query": "quetzalx"})
        return [t["id"] for t in result.structured_content["tickets"]]

    url = settings.database_url
    tickets = int(scalar(url, "SELECT count(*) FROM tickets")) + 1
    column(url, OLD_SERVER_TICKET)
    column(url, OLD_SERVER_COUNT)
    assert await found() == []

    first = run(url, "db", "reindex")
    assert first.returncode == 0, first.stderr
    assert f"checked the search postings of {tickets} tickets" in first.stderr
    assert await found() == ["SUP-9900001"]
    assert scalar(url, "SELECT count(*) FROM ticket_search_postings WHERE term = 'quetzalx'") == "1"
    again = run(url, "db", "reindex")
    assert again.returncode == 0, again.stderr
    assert scalar(url, "SELECT count(*) FROM ticket_search_postings WHERE term = 'quetzalx'") == "1"
