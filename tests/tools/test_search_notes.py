"""The note of an empty search_tickets_v2 page with `sort: "due"` or `due_before`, on
both engines: it names the reason (no SLA targets loaded, none for those tickets, a
resolved or closed ticket has no due time, none before `due_before`) instead of "no
tickets in the queues you can see" or filters that match nothing "together" (issue 37,
a review's finding)."""

from __future__ import annotations

from fastmcp import Client

from tests.tools.test_backlog import _load, policy
from tests.tools.test_search import search
from ticket_server.server import build_server
from ticket_server.settings import Settings

NO_TARGETS = "no SLA targets are loaded: an operator loads a policy with `ticket-server sla load`"
BY_DUE = "sort 'due' lists only the tickets with one; sort 'newest' lists them all."
BEFORE = "due_before keeps only the tickets with one; drop it to list the others."


async def _note(client: Client, **arguments: object) -> str:
    result = await search(client, **arguments)
    assert result.is_error is False and result.structured_content["tickets"] == []
    note: str = result.structured_content["note"]
    return note


async def test_sort_due_before_any_policy_says_none_is_loaded(client: Client) -> None:
    """The 2,400 tickets are visible; none has a due time since no target is loaded."""
    assert await _note(client, query="", sort="due", limit=3) == (
        f"No ticket you can see has an SLA due time ({NO_TARGETS}). {BY_DUE}"
    )
    assert await _note(client, query="", status=["closed"], due_before="2030-01-01T00:00:00Z") == (
        f"No ticket you can see has an SLA due time ({NO_TARGETS}). {BEFORE}"
    )
    # with words: sort due keeps the tickets holding every one of them
    assert await _note(client, query="refund webhook", sort="due") == (
        "No ticket holds all of 'refund', 'webhook': sort 'due' lists only the tickets "
        "holding every word."
    )


async def test_sort_due_and_due_before_name_why_the_filtered_tickets_have_none(
    settings: Settings, mode: str
) -> None:
    """With a policy (no target for low; resolved and closed tickets store no due time):
    one filter is never said to match nothing "together", and the note says why."""
    await _load(settings, policy(high_resolution=2400))
    async with Client(build_server(settings), mode=mode) as client:
        assert await _note(client, query="", sort="due", priority=["low"]) == (
            "No ticket you can see with priority low has an SLA due time (no SLA target "
            "applies to them: the SLA policy has none for their queue and priority). " + BY_DUE
        )
        done = "a resolved or closed ticket has none: nothing is due on it"
        assert await _note(client, query="", sort="due", status=["resolved"]) == (
            f"No ticket you can see with status resolved has an SLA due time ({done}). {BY_DUE}"
        )
        closed = await _note(client, query="", status=["closed"], due_before="2030-01-01T00:00:00Z")
        assert closed == (
            f"No ticket you can see with status closed has an SLA due time ({done}). {BEFORE}"
        )
        words = await _note(client, query="invoice", sort="due", status=["closed", "resolved"])
        assert words.startswith(
            "No ticket with the words and status closed/resolved has an SLA due time"
        )
        assert await _note(client, query="", due_before="2000-01-01T00:00:00Z") == (
            "Some tickets you can see have an SLA due time, but none before due_before; widen it."
        )
        # a filter that nothing passes is still named as before
        owner = await _note(client, query="", sort="due", priority=["low"], owner="nobody")
        assert owner.startswith("Some of the tickets you can see match, but none with owner")
        listed = await search(client, query="", sort="due", limit=3)
        assert len(listed.structured_content["tickets"]) == 3
        assert listed.structured_content["note"] is None


async def test_a_breached_filter_is_named_with_its_value(settings: Settings) -> None:
    """`breached: false` was named "with breached" in the note of an empty sort "due" page,
    which reads as the opposite filter (a review's finding); it is named with its value."""
    await _load(settings, policy(high_resolution=2400))
    async with Client(build_server(settings)) as client:
        for breached in (False, True):
            note = await _note(client, query="", sort="due", status=["closed"], breached=breached)
            assert note.startswith(
                f"No ticket you can see with status closed, breached {str(breached).lower()} "
                "has an SLA due time"
            ), note
