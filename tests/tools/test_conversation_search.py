"""search_tickets_v2 with search_in="conversation": comment bodies searched by the same
analyzer as ticket text, on SQLite and PostgreSQL, within the caller's queues, with every
comment the full ticket read shows (internal notes included), and the default search
unchanged (issue 13, item 2)."""

from __future__ import annotations

from fastmcp import Client

from tests.helpers import create_caller, text_of
from ticket_server import db
from ticket_server.server import build_server
from ticket_server.settings import Settings

# Seeded: "PAY-882" is written only in an internal note of SUP-4412 (billing); "fraud"
# only in a customer's public comment on SUP-4412; "reveal" only in a customer's comment
# on SUP-1337 (support).


async def search(client: Client, **arguments):
    result = await client.call_tool("search_tickets_v2", arguments, raise_on_error=False)
    assert result.is_error is False, text_of(result)
    return result.structured_content


async def test_comment_text_found_only_when_asked(client: Client) -> None:
    """The default search does not look at comments and its hits carry no new key; the
    conversation search finds the ticket by an internal note (get_ticket shows internal
    notes to every reader) and by a customer's comment, and says the match is a comment.
    null and "" mean the default, as for every optional argument (C22)."""
    default = await search(client, query="PAY-882")
    assert default["tickets"] == [] and "No ticket contains any of 'pay-882'" in default["note"]
    for absent in (None, ""):
        assert await search(client, query="PAY-882", search_in=absent) == default
    invoice = await search(client, query="invoice")
    assert all("matched_in" not in t for t in invoice["tickets"])
    assert invoice == await search(client, query="invoice", search_in="tickets")

    note = await search(client, query="PAY-882", search_in="conversation")
    assert [(t["id"], t["matched_in"]) for t in note["tickets"]] == [("SUP-4412", ["comment"])]
    # Every comment get_ticket shows may be found; an internal note is one of them.
    shown = (
        await client.call_tool(
            "get_ticket", {"ticket_id": "SUP-4412", "fields": ["conversation"], "limit": 50}
        )
    ).structured_content
    assert any(
        "PAY-882" in c["body"]["text"] and c["visibility"] == "internal"
        for c in shown["conversation"]["comments"]
    )
    fraud = await search(client, query="fraud alert", search_in="conversation")
    assert (
        fraud["tickets"][0]["id"] == "SUP-4412" and "comment" in fraud["tickets"][0]["matched_in"]
    )

    # Ticket text and comments together: a word in the subject still ranks the ticket.
    both = await search(client, query="invoice", search_in="conversation", limit=50)
    places = {t["id"]: t["matched_in"] for t in both["tickets"]}
    assert places["SUP-2201"][:1] == ["subject"]


async def test_conversation_search_stays_in_the_callers_queues(
    settings: Settings, mode: str
) -> None:
    """A billing-only caller finds SUP-4412 by its comments, never SUP-1337 (support) by
    the customer's comment on it, whose text does not reach it either."""
    await create_caller(settings.database_url, "billing", queues=["billing"])
    everyone = build_server(settings)
    billing = build_server(settings.model_copy(update={"stdio_caller": "billing"}))
    async with Client(everyone, mode=mode) as client:
        assert [
            t["id"]
            for t in (await search(client, query="reveal", search_in="conversation"))["tickets"]
        ] == ["SUP-1337"]
    async with Client(billing, mode=mode) as client:
        found = await search(client, query="reveal", search_in="conversation")
        assert found["tickets"] == [] and "SUP-1337" not in str(found)
        listed = await search(client, query="", search_in="conversation", limit=50)
        assert {t["queue"] for t in listed["tickets"]} == {"billing"}
        mine = await search(client, query="PAY-882", search_in="conversation")
        assert [t["id"] for t in mine["tickets"]] == ["SUP-4412"]


async def test_conversation_pages_and_cursors(client: Client) -> None:
    """Paging a conversation search returns every match once; a cursor of the default
    search is refused by the conversation search (another ranking), and the reverse."""
    first = await search(client, query="refund", search_in="conversation", limit=5)
    seen = [t["id"] for t in first["tickets"]]
    cursor = first["next_cursor"]
    assert cursor is not None
    while cursor:
        page = await search(
            client, query="refund", search_in="conversation", limit=5, cursor=cursor
        )
        seen += [t["id"] for t in page["tickets"]]
        assert all(t["matched_in"] for t in page["tickets"])
        cursor = page["next_cursor"]
    assert len(seen) == len(set(seen))
    assert set(seen) >= {
        t["id"] for t in (await search(client, query="refund", limit=50))["tickets"]
    }
    ticket_cursor = (await search(client, query="refund", limit=5))["next_cursor"]
    refused = await client.call_tool(
        "search_tickets_v2",
        {"query": "refund", "search_in": "conversation", "cursor": ticket_cursor},
        raise_on_error=False,
    )
    assert refused.is_error and "cursor is not valid" in text_of(refused)
    refused = await client.call_tool(
        "search_tickets_v2",
        {"query": "refund", "cursor": first["next_cursor"]},
        raise_on_error=False,
    )
    assert refused.is_error and "cursor is not valid" in text_of(refused)


async def test_a_new_internal_note_is_found(settings: Settings) -> None:
    """A comment written through the write tools is analyzed and indexed with it, on both
    engines: its words find the ticket at once, typed in another case and form."""
    await create_caller(
        settings.database_url, "agent", ("tickets:read", "tickets:write"), queues=["billing"]
    )
    server = build_server(
        settings.model_copy(update={"stdio_caller": "agent", "confirm_writes": []})
    )
    async with Client(server) as client:
        before = await search(client, query="zanzibars", search_in="conversation")
        assert before["tickets"] == []
        await client.call_tool(
            "add_internal_note",
            {"ticket_id": "SUP-4412", "note": "Customer mentioned the ZANZIBAR escalation again."},
        )
        after = await search(client, query="zanzibars", search_in="conversation")
        assert [(t["id"], t["matched_in"]) for t in after["tickets"]] == [("SUP-4412", ["comment"])]
        assert (await search(client, query="Zanzibar"))["tickets"] == []


async def test_upgrade_analyzes_existing_comments(database_url: str) -> None:
    """0007 fills the comments' search column for comments stored before it (on a seeded
    database taken back to 0006 and up again), so they are found as seeded ones are."""
    await _downgrade_and_upgrade(database_url)
    async with Client(
        build_server(Settings(database_url=database_url, tool_rate_limit="100000/minute"))
    ) as client:
        found = await search(client, query="PAY-882", search_in="conversation")
        assert [(t["id"], t["matched_in"]) for t in found["tickets"]] == [("SUP-4412", ["comment"])]
        # Ticket text search is as before the round trip.
        assert (await search(client, query="INV-20931"))["tickets"][0]["id"] == "SUP-4412"


async def _downgrade_and_upgrade(url: str) -> None:
    import asyncio

    await asyncio.to_thread(db.downgrade, url, "0006_writes")
    await asyncio.to_thread(db.upgrade, url)


async def test_a_restricted_caller_learns_no_word_of_other_queues(
    settings: Settings, mode: str
) -> None:
    """The notes of a billing-only caller's search do not tell which words other queues'
    tickets and comments hold: a word written only outside billing ('reveal', a comment
    on SUP-1337; 'password', support tickets) is answered as a word held nowhere, and is
    never offered as the correction of a typo, in either kind of search. A caller of every
    queue still gets the correction."""
    await create_caller(settings.database_url, "billing", queues=["billing"])
    billing = build_server(settings.model_copy(update={"stdio_caller": "billing"}))
    async with Client(build_server(settings), mode=mode) as client:
        fixed = await search(client, query="reveel", search_in="conversation")
        assert "searched 'reveal' instead" in fixed["note"] and fixed["tickets"]
    async with Client(billing, mode=mode) as client:
        for search_in in ("conversation", None):
            holder = "ticket or comment" if search_in else "ticket"
            nowhere = await search(client, query="zqxjkv", search_in=search_in)
            for word in ("reveal", "reveel", "password", "pasword"):
                found = await search(client, query=word, search_in=search_in)
                assert found == {
                    **nowhere,
                    "note": nowhere["note"].replace("'zqxjkv'", f"'{word}'"),
                }, word
                assert f"No {holder} contains any of '{word}'" in found["note"]
            mixed = await search(client, query="invoice reveal", search_in=search_in)
            assert (
                mixed["tickets"]
                and mixed["note"] == f"No {holder} contains 'reveal'; left out of the search."
            )
