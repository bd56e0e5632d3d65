"""SLA state, counts and the queue overview through the in-memory client, on both
engines, with a fixed clock (``build_server(now=...)``): the full read's SLA state of a
ticket with a stored history, a policy change applying at the next read, counts equal
to a brute-force count over the same data for random filters (a property test), and a
caller limited to one queue seeing only its counts."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from mcp import MCPError
from mcp.types import ResourceTemplateReference
from sqlalchemy import select

from tests.helpers import create_caller
from ticket_server.db import open_repository
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tickets.domain import OPEN_STATUSES, TicketPriority, TicketStatus
from ticket_server.tickets.models import Comment, Ticket, TicketEvent
from ticket_server.tickets.sla import Change, Policy, TicketFacts, sla_state
from ticket_server.tickets.sla_store import AGE_BUCKETS, load_policy, replace_policy
from ticket_server.tools.backlog import MAX_GROUPS

WEEKDAYS = {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")}
TICKET = "SUP-9340001"
MONDAY_9 = datetime(2026, 11, 30, 8, tzinfo=UTC)  # 09:00 in Berlin
NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)  # Tuesday 10:00 in Berlin


def policy(
    high_resolution: int, holiday_calendar: str | None = None, high_first_response: int = 60
) -> Policy:
    return Policy.model_validate(
        {
            "queues": {
                "billing": {
                    "time_zone": "Europe/Berlin",
                    "hours": WEEKDAYS,
                    "holiday_calendar": holiday_calendar,
                    "targets": {
                        "high": {
                            "first_response": high_first_response,
                            "resolution": high_resolution,
                        },
                        "normal": {"first_response": 240, "resolution": 2400},
                        "urgent": {"first_response": 30, "resolution": 240},
                    },
                },
                "*": {"targets": {"urgent": {"first_response": 60}}},
            }
        }
    ).check()


async def _load(settings: Settings, value: Policy) -> None:
    # As `sla load` does, with room for deriving every ticket's SLA columns under load.
    repo = open_repository(settings.model_copy(update={"database_timeout": 120}))
    try:
        await repo.transaction(lambda conn: replace_policy(conn, value))
    finally:
        await repo.aclose()


async def _ticket_with_history(settings: Settings) -> None:
    """Opened Monday 09:00 in billing; a public agent reply at 09:30; waiting on the
    customer 10:00 - 12:00; escalated to support (24h, no target) at 13:00 and back to
    billing Tuesday at 09:00 (Berlin)."""
    at = MONDAY_9
    repo = open_repository(settings)
    event = {"actor": "a.agent", "actor_type": "agent"}
    try:
        await repo.add_all(
            [
                {
                    "id": TICKET,
                    "subject": "Invoice total wrong",
                    "body": "The total is off by 10 EUR.",
                    "status": "open",
                    "priority": "high",
                    "owner": "a.agent",
                    "queue": "billing",
                    "customer": "Test Customer",
                    "created_at": at,
                    "updated_at": at + timedelta(hours=24),
                }
            ],
            comments=[
                {
                    "ticket_id": TICKET,
                    "author": "a.agent",
                    "author_type": "agent",
                    "visibility": "public",
                    "body": "Looking into it.",
                    "created_at": at + timedelta(minutes=30),
                }
            ],
            events=[
                {"ticket_id": TICKET, "field": "status", "old_value": "new", "new_value": "open",
                 "created_at": at + timedelta(minutes=30), **event},
                {"ticket_id": TICKET, "field": "status", "old_value": "open",
                 "new_value": "waiting_on_customer", "created_at": at + timedelta(hours=1), **event},
                {"ticket_id": TICKET, "field": "status", "old_value": "waiting_on_customer",
                 "new_value": "open", "created_at": at + timedelta(hours=3), **event},
                {"ticket_id": TICKET, "field": "queue", "old_value": "billing",
                 "new_value": "support", "created_at": at + timedelta(hours=4), **event},
                {"ticket_id": TICKET, "field": "queue", "old_value": "support",
                 "new_value": "billing", "created_at": at + timedelta(hours=24), **event},
            ],
        )  # fmt: skip
    finally:
        await repo.aclose()


async def test_full_read_sla_from_stored_history_and_a_policy_change(settings: Settings) -> None:
    """Billing counted 09:00-10:00 and 12:00-13:00 on Monday, support (24h, the default
    calendar) 13:00 Monday to 09:00 Tuesday (20h), billing again 09:00-10:00: 23 business
    hours. The first response was met at 09:30. A new policy applies at the next read."""
    await _ticket_with_history(settings)
    await _load(settings, policy(high_resolution=2400))
    server = build_server(settings, now=lambda: NOW)
    async with Client(server) as client:
        read = await client.call_tool("get_ticket", {"ticket_id": TICKET, "fields": ["sla"]})
        sla = read.structured_content["sla"]
        assert sla["covered"] is True and sla["paused"] is False
        assert sla["time_zone"] == "Europe/Berlin"
        assert sla["first_response"] == {
            "target_minutes": 60,
            "due_at": "2026-11-30T09:00:00Z",
            "met_at": "2026-11-30T08:30:00Z",
            "breached": False,
            "breached_at": None,
            "business_minutes_left": 30,
        }
        resolution = sla["resolution"]
        assert resolution["business_minutes_left"] == 2400 - 23 * 60
        assert resolution["breached"] is False
        # 17 hours left from Tuesday 10:00 in Berlin: 7 on Tuesday, 8 on Wednesday, 2 on Thursday.
        assert resolution["due_at"] == "2026-12-03T10:00:00Z"
        # The whole read carries it too, and the resource.
        whole = await client.call_tool("get_ticket", {"ticket_id": TICKET})
        assert whole.structured_content["sla"] == sla
        resource = json.loads((await client.read_resource(f"tickets://ticket/{TICKET}"))[0].text)
        assert resource["sla"] == sla

        await _load(settings, policy(high_resolution=600))
        read = await client.call_tool("get_ticket", {"ticket_id": TICKET, "fields": ["sla"]})
        changed = read.structured_content["sla"]["resolution"]
        assert changed["breached"] is True and changed["business_minutes_left"] == 600 - 23 * 60
        # 600 min: 2h on Monday in billing, then 8h of the 20h in support (from 12:00 UTC).
        assert changed["breached_at"] == "2026-11-30T20:00:00Z"

        # A holiday calendar, stored and read back: the UAE's National Day (Wednesday 2
        # and Thursday 3 December) takes two days off, so the 17 hours left from Tuesday
        # 10:00 run 7 on Tuesday, 8 on Friday and 2 on Monday 7 December.
        await _load(settings, policy(high_resolution=2400, holiday_calendar="AE"))
        read = await client.call_tool("get_ticket", {"ticket_id": TICKET, "fields": ["sla"]})
        assert read.structured_content["sla"]["resolution"]["due_at"] == "2026-12-07T10:00:00Z"
        repo = open_repository(settings)
        try:
            stored = await repo.read(load_policy)
        finally:
            await repo.aclose()
        assert stored == policy(high_resolution=2400, holiday_calendar="AE")


async def test_the_history_lists_the_targets_missed(settings: Settings) -> None:
    """history.sla_breaches: each SLA target the ticket missed, newest first, from the
    same state as its sla field (issue 34): none while both targets hold; a first
    response given late (20 minutes from 09:00, the reply at 09:30) and a resolution
    target passed while the clock ran (as in the test above)."""
    await _ticket_with_history(settings)
    await _load(settings, policy(high_resolution=2400))
    async with Client(build_server(settings, now=lambda: NOW)) as client:

        async def breaches() -> Any:
            read = await client.call_tool(
                "get_ticket", {"ticket_id": TICKET, "fields": ["history"]}
            )
            return read.structured_content["history"]["sla_breaches"]

        assert await breaches() == []
        await _load(settings, policy(high_resolution=600, high_first_response=20))
        missed = [
            {"clock": "resolution", "breached_at": "2026-11-30T20:00:00Z"},
            {"clock": "first_response", "breached_at": "2026-11-30T08:20:00Z"},
        ]
        assert await breaches() == missed
        whole = (await client.call_tool("get_ticket", {"ticket_id": TICKET})).structured_content
        assert whole["history"]["sla_breaches"] == missed
        assert whole["sla"]["first_response"]["met_at"] == "2026-11-30T08:30:00Z"
        assert whole["sla"]["first_response"]["breached_at"] == "2026-11-30T08:20:00Z"
        resource = json.loads((await client.read_resource(f"tickets://ticket/{TICKET}"))[0].text)
        assert resource["history"]["sla_breaches"] == missed


# --- counts equal a brute-force count ------------------------------------------------


async def _everything(settings: Settings) -> tuple[list[dict[str, Any]], dict[str, bool | None]]:
    """Every ticket (as a dict) and, by id, whether it breached (None: no target), computed
    here from all events and comments read at once."""
    t, e, c = Ticket.__table__, TicketEvent.__table__, Comment.__table__
    repo = open_repository(settings)
    try:
        tickets = await repo.read(
            lambda conn: [dict(r) for r in conn.execute(select(t)).mappings()]
        )
        events = await repo.read(lambda conn: list(conn.execute(select(e).order_by(e.c.pk))))
        comments = await repo.read(lambda conn: list(conn.execute(select(c))))
        stored = await repo.read(load_policy)
    finally:
        await repo.aclose()
    changes: dict[str, list[Change]] = {}
    for ev in events:
        if ev.field in ("status", "queue"):
            changes.setdefault(ev.ticket_id, []).append(
                Change(str(ev.field), ev.old_value, ev.new_value, ev.created_at)
            )
    first: dict[str, datetime] = {}
    for cm in comments:
        if cm.author_type == "agent" and cm.visibility == "public":
            first[cm.ticket_id] = min(first.get(cm.ticket_id, cm.created_at), cm.created_at)
    breached: dict[str, bool | None] = {}
    for row in tickets:
        state = sla_state(
            TicketFacts(
                row["created_at"], TicketStatus(row["status"]), row["queue"],
                TicketPriority(row["priority"]), changes.get(row["id"], []), first.get(row["id"]),
            ),
            stored,
            NOW,
        )  # fmt: skip
        breached[row["id"]] = (
            None
            if not state.covered
            else any(k is not None and k.breached for k in (state.first_response, state.resolution))
        )
    return tickets, breached


def _bucket(created: datetime) -> str:
    for name, bound in AGE_BUCKETS:
        if bound is not None and created > NOW - bound:
            return name
    return AGE_BUCKETS[-1][0]


def _expected(
    tickets: list[dict[str, Any]], breached: dict[str, bool | None], args: dict[str, Any],
    queues: set[str] | None,
) -> dict[tuple[Any, ...], tuple[int, Counter[str], int, int]]:  # fmt: skip
    statuses = set(args.get("status") or [s.value for s in OPEN_STATUSES])
    out: dict[tuple[Any, ...], tuple[int, Counter[str], int, int]] = {}
    for row in tickets:
        if row["status"] not in statuses or (queues is not None and row["queue"] not in queues):
            continue
        if args.get("priority") and row["priority"] not in args["priority"]:
            continue
        if args.get("queue") and row["queue"] != args["queue"]:
            continue
        if args.get("owner") and (row["owner"] or "").lower() != args["owner"].lower():
            continue
        key = tuple(
            row[k] for k in ("queue", "status", "priority", "owner") if k in args["group_by"]
        )
        n, ages, late, without = out.get(key, (0, Counter(), 0, 0))
        ages[_bucket(row["created_at"])] += 1
        out[key] = (
            n + 1, ages, late + (breached[row["id"]] is True), without + (breached[row["id"]] is None)
        )  # fmt: skip
    return out


def _got(result: dict[str, Any], group_by: list[str]) -> dict[tuple[Any, ...], Any]:
    got = {}
    for g in result["groups"]:
        key = tuple(g["key"][k] for k in ("queue", "status", "priority", "owner") if k in group_by)
        got[key] = (g["count"], Counter({k: v for k, v in g["age"].items() if v}), g["breached"],
                    g["without_sla"])  # fmt: skip
    return got


FILTERS = st.fixed_dictionaries(
    {
        "group_by": st.lists(st.sampled_from(["queue", "status", "priority", "owner"]), unique=True),
    },
    optional={
        "status": st.lists(st.sampled_from([s.value for s in TicketStatus]), min_size=1, max_size=3, unique=True),
        "priority": st.lists(st.sampled_from([p.value for p in TicketPriority]), min_size=1, max_size=2, unique=True),
        "queue": st.sampled_from(["billing", "support", "engineering"]),
        "owner": st.sampled_from(["p.silva", "e.larsen", "nobody"]),
    },
)  # fmt: skip


def test_counts_equal_a_brute_force_count(settings: Settings) -> None:
    """For random filters and groupings, count_tickets' groups, ages and breach counts
    equal a count made here over every ticket (the seeded 2,400 and their histories);
    past MAX_GROUPS groups, the largest are listed, exactly, and truncated says so."""
    with asyncio.Runner() as runner:
        runner.run(_load(settings, policy(high_resolution=2400)))
        tickets, breached = runner.run(_everything(settings))
        client = Client(build_server(settings, now=lambda: NOW))
        runner.run(client.__aenter__())

        @hypothesis_settings(
            max_examples=12,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(args=FILTERS)
        def check(args: dict[str, Any]) -> None:
            result = runner.run(client.call_tool("count_tickets", args)).structured_content
            expected = _expected(tickets, breached, args, None)
            assert result["total"] == sum(v[0] for v in expected.values())
            got = _got(result, args["group_by"])
            assert result["truncated"] is (len(expected) > MAX_GROUPS)
            if result["truncated"]:
                assert len(got) == MAX_GROUPS and all(expected[k] == v for k, v in got.items())
                smallest = min(v[0] for v in got.values())
                assert all(v[0] <= smallest for k, v in expected.items() if k not in got)
            else:
                assert got == expected

        try:
            check()
        finally:
            runner.run(client.__aexit__(None, None, None))


async def test_a_caller_limited_to_a_queue_counts_only_its_tickets(settings: Settings) -> None:
    await _load(settings, policy(high_resolution=2400))
    tickets, breached = await _everything(settings)
    await create_caller(settings.database_url, "billing-lead", queues=["billing"])
    server = build_server(
        settings.model_copy(update={"stdio_caller": "billing-lead"}), now=lambda: NOW
    )
    async with Client(server) as client:
        counted = (
            await client.call_tool("count_tickets", {"group_by": ["queue"]})
        ).structured_content
        expected = _expected(tickets, breached, {"group_by": ["queue"]}, {"billing"})
        assert _got(counted, ["queue"]) == expected and list(expected) == [("billing",)]
        with pytest.raises(ToolError) as other:
            await client.call_tool("count_tickets", {"queue": "support"})
        assert str(other.value) == (
            "There is no queue 'support' among the queues you can see: billing. "
            "Use one of these names, or leave queue out."
        )
        overview = json.loads((await client.read_resource("tickets://queue/billing"))[0].text)
        assert overview["open_total"] == expected[("billing",)][0]
        assert overview["breached"] == expected[("billing",)][2]
        soon = overview["breaching_soon"]
        horizon = NOW + timedelta(hours=2)
        assert soon and all(datetime.fromisoformat(t["due_at"]) <= horizon for t in soon)
        assert [t["due_at"] for t in soon] == sorted(t["due_at"] for t in soon)
        assert all(t["subject"]["untrusted"] is True for t in overview["oldest"])
        with pytest.raises(MCPError):
            await client.read_resource("tickets://queue/support")
        template = ResourceTemplateReference(type="ref/resource", uri="tickets://queue/{name}")
        assert (await client.complete(template, {"name": "name", "value": ""})).values == [
            "billing"
        ]
        prompt = await client.get_prompt("triage_queue", {"queue": "billing"})
        data = json.loads(prompt.messages[1].content.text)
        assert data["overview"] == overview
        with pytest.raises((ToolError, MCPError)):
            await client.call_tool("count_tickets", {"group_by": ["customer"]})


async def test_a_queue_without_tickets_yet_is_counted_not_unknown(settings: Settings) -> None:
    """A review's finding: a queue an operator has just added (`ticket-server queues
    add legal`) holds no ticket yet. Completion offered it for `tickets://queue/{name}`,
    but reading it answered "not found", and `count_tickets` and `search_tickets_v2`
    with `queue: "legal"` said there was no queue 'legal' among yours, while a caller
    limited to it got its (empty) counts. Every caller now sees it as a queue with no
    tickets; an unknown name is still refused, naming the queue as one of yours."""
    from ticket_server.tickets.directory import add_queue

    repo = open_repository(settings)
    try:
        await repo.transaction(lambda conn: add_queue(conn, "legal", None, "", "UTC"))
    finally:
        await repo.aclose()
    server = build_server(settings.model_copy(update={"toolsets": ["read", "backlog"]}))
    async with Client(server) as client:
        template = ResourceTemplateReference(type="ref/resource", uri="tickets://queue/{name}")
        completed = await client.complete(template, {"name": "name", "value": "le"})
        assert completed.values == ["legal"]
        overview = json.loads((await client.read_resource("tickets://queue/legal"))[0].text)
        assert overview["queue"] == "legal" and overview["open_total"] == 0
        assert overview["oldest"] == [] and overview["breaching_soon"] == []
        counted = await client.call_tool("count_tickets", {"queue": "Legal"})
        assert counted.structured_content["total"] == 0
        found = await client.call_tool("search_tickets_v2", {"queue": "legal"})
        assert found.structured_content["tickets"] == []
        with pytest.raises(ToolError) as unknown:
            await client.call_tool("count_tickets", {"queue": "legl"})
        assert "billing, engineering, legal, onboarding" in str(unknown.value)


async def test_triage_queue_with_a_blank_owner_is_the_whole_queue(settings: Settings) -> None:
    """A review's finding: `triage_queue` with `owner` = `"   "` (a form's blank field)
    answered "No open tickets in a queue named 'billing'", though billing has many; a
    blank owner now means no owner, as `count_tickets` and `""` already took it."""
    async with Client(build_server(settings, now=lambda: NOW)) as client:
        whole = await client.get_prompt("triage_queue", {"queue": "billing"})
        for blank in ("", "   "):
            prompt = await client.get_prompt("triage_queue", {"queue": "billing", "owner": blank})
            assert prompt.messages[1].content.text == whole.messages[1].content.text
