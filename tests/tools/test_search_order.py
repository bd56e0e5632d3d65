"""Tests that fail when search_tickets_v2's order or paging breaks (issue 37, item 5):
recency only breaks ties, and a cursor is refused under any other argument that changes
the order or the result set. (The idf direction and ``sort`` in the cursor's fingerprint
are tests/tools/test_search_guarantees.py's; subject above body is
tests/tools/test_search.py::test_subject_weighs_above_body.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastmcp import Client

from tests.helpers import text_of
from tests.tools.test_search import ids, search, ticket
from ticket_server.db import open_repository
from ticket_server.settings import Settings

WHEN = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "plan",
    [
        {},  # the postings read best first
        {"updated_after": "2000-01-01T00:00:00Z"},  # every holder scored (build_page)
        {"search_in": "conversation"},
    ],
)
async def test_recency_only_breaks_ties(client: Client, settings: Settings, plan: dict) -> None:
    """A newer ticket never outranks an older one that matches better: more of the
    words first (even with a lower score), then the higher score (subject and body
    above subject alone, above body alone); only between equal matches does the newer
    come first. Each ticket is newer than the one before it."""
    made = [
        ticket("SUP-9800001", "Other", "quokka numbat", when=WHEN),  # both words, in the body
        ticket("SUP-9800002", "Quokka report", "the quokka", when=WHEN + timedelta(days=1)),
        ticket("SUP-9800003", "Quokka again", "the quokka", when=WHEN + timedelta(days=2)),
        ticket("SUP-9800004", "Quokka", when=WHEN + timedelta(days=3)),
        ticket("SUP-9800005", "Other", "a numbat", when=WHEN + timedelta(days=4)),
    ]
    repo = open_repository(settings)
    await repo.add_all(made)
    await repo.aclose()
    assert await ids(client, query="quokka numbat", **plan) == [
        "SUP-9800001",
        "SUP-9800003",  # the same match as SUP-9800002, newer
        "SUP-9800002",
        "SUP-9800004",
        "SUP-9800005",  # the newest, one word in the body
    ]


# Two values of each argument that narrows or orders a search, each value leaving at
# least two tickets (so the first page of one has a cursor). `sort` is
# test_search_guarantees.py's.
CHANGED = {
    "query": ("invoice", "refund"),
    "status": (["closed"], ["resolved"]),
    "priority": (["normal"], ["high"]),
    "queue": ("billing", "support"),
    "owner": ("n.haddad", "t.brennan"),
    "customer": ("Beacon", "Driftwood"),
    "created_after": ("2024-06-01T00:00:00Z", "2024-07-01T00:00:00Z"),
    "updated_after": ("2024-06-01T00:00:00Z", "2024-07-01T00:00:00Z"),
    "updated_before": ("2026-06-01T00:00:00Z", "2026-05-01T00:00:00Z"),
    "search_in": ("conversation", "tickets"),
    "tags": (["refund"], ["vip"]),
    "fields": ([{"name": "severity", "value": "sev1"}], [{"name": "severity", "value": "sev2"}]),
}
NOT_OF_THE_SEARCH = {"cursor", "limit", "sort"}  # limit: the page's size, not its order
# Their values select tickets only under an SLA policy, which this module's data has
# none of: test_sla_stored.py::test_a_cursor_is_refused_when_a_due_filter_changes.
NEEDS_A_POLICY = {"due_before", "breached"}


async def test_every_argument_that_shapes_a_search_is_covered(client: Client) -> None:
    """The table above names every argument of search_tickets_v2 but the cursor, the
    page size and sort (and the SLA filters, tested where a policy is loaded): an
    argument added later fails here until it is listed."""
    tool = next(t for t in await client.list_tools() if t.name == "search_tickets_v2")
    assert set(tool.inputSchema["properties"]) - NOT_OF_THE_SEARCH == set(CHANGED) | NEEDS_A_POLICY


@pytest.mark.parametrize("name", sorted(CHANGED))
async def test_a_cursor_is_refused_when_any_argument_changes(client: Client, name: str) -> None:
    """A cursor made by one search and sent with one argument changed is refused (it
    would page through another order or another set of tickets), and the same search
    accepts it."""
    first, second = CHANGED[name]
    base = {"query": "invoice"} if name == "search_in" else {}
    arguments = {**base, name: first, "limit": 1}
    page = await search(client, **arguments)
    assert page.is_error is False, text_of(page)
    cursor = page.structured_content["next_cursor"]
    assert cursor, name
    same = await search(client, **arguments, cursor=cursor)
    assert same.is_error is False, text_of(same)
    changed = await search(client, **{**arguments, name: second}, cursor=cursor)
    assert changed.is_error is True, name
    assert "not valid for this search" in text_of(changed)
