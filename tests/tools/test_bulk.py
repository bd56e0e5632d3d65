"""bulk_update_tickets (issue 36, item 4) through the in-memory client, on SQLite and
PostgreSQL, in both protocol revisions: a dry run equals the confirmed run's result when
nothing changed between them; a ticket changed since is skipped and listed; refusals are
listed, never silent; a token made for another change is refused; 500 tickets leave 500
audit rows."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import text_of
from tests.tools.test_writes import _sql
from ticket_server.settings import Settings

AGENT_SCOPES = ("tickets:read", "tickets:write")
EVERY_TOOLSET = ["read", "respond", "triage", "related"]


async def _tickets(settings: Settings, where: str, n: int) -> list[str]:
    rows = await _sql(settings, f"SELECT id FROM tickets WHERE {where} ORDER BY pk LIMIT {n}")
    assert len(rows) == n, f"the sample lacks {n} tickets where {where}"
    return [r[0] for r in rows]


def _shown(tickets: list[dict]) -> list[tuple]:
    return [(t["id"], t["changes"], t["adds"]) for t in tickets]


async def test_dry_run_equals_the_confirmed_run_and_changed_tickets_are_skipped(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    open_ = await _tickets(settings, "queue = 'billing' AND status IN ('open', 'in_progress')", 6)
    (closed,) = await _tickets(settings, "queue = 'billing' AND status = 'closed'", 1)
    (other,) = await _tickets(settings, "queue = 'support' AND status = 'open'", 1)
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    change = {"priority": "urgent", "reply": "We are on it.", "owner": "n.haddad"}
    async with Client(server, mode=mode) as client:
        dry = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": [*open_[:3], closed, other], **change}
        )
        plan = dry.structured_content
        assert plan["dry_run"] is True and plan["plan_token"]
        assert [t["id"] for t in plan["tickets"]] == open_[:3]
        assert {f["id"] for f in plan["failed"]} == {closed, other}  # listed, with why
        assert all(f["reason"] for f in plan["failed"])
        fields = {c["field"] for t in plan["tickets"] for c in t["changes"]}
        assert fields <= {"priority", "owner"} and "priority" in fields
        # Nothing was written by the dry run.
        for t in plan["tickets"]:
            now = await _sql(settings, "SELECT version FROM tickets WHERE id = :t", t=t["id"])
            assert now[0][0] == t["version"]
        confirmed = {
            **change,
            "dry_run": False,
            "plan_token": plan["plan_token"],
            "idempotency_key": "bulk-1",
        }
        done = await client.call_tool("bulk_update_tickets", confirmed)
        result = done.structured_content
        assert _shown(result["tickets"]) == _shown(plan["tickets"])
        assert result["skipped"] == [] and result["failed"] == []
        replies = "SELECT count(*) FROM comments WHERE body = 'We are on it.'"
        assert (await _sql(settings, replies))[0][0] == 3
        retried = await client.call_tool("bulk_update_tickets", confirmed)  # the key: replays
        assert retried.structured_content == result
        assert (await _sql(settings, replies))[0][0] == 3
        # Again: one ticket changes between the dry run and the confirmed run.
        second = {"status": "waiting_on_customer", "note": "Waiting for the customer."}
        dry = await client.call_tool("bulk_update_tickets", {"ticket_ids": open_[3:], **second})
        token = dry.structured_content["plan_token"]
        await client.call_tool("assign_ticket", {"ticket_id": open_[4], "owner": "someone"})
        forged = await client.call_tool(
            "bulk_update_tickets",
            {**second, "note": "Another note.", "dry_run": False, "plan_token": token},
            raise_on_error=False,
        )
        assert forged.is_error and "does not match this change" in text_of(forged)
        done = await client.call_tool(
            "bulk_update_tickets", {**second, "dry_run": False, "plan_token": token}
        )
        result = done.structured_content
    assert [t["id"] for t in result["tickets"]] == [open_[3], open_[5]]
    assert [s["id"] for s in result["skipped"]] == [open_[4]]
    status = await _sql(settings, "SELECT status FROM tickets WHERE id = :t", t=open_[4])
    assert status[0][0] != "waiting_on_customer"  # never written blind


async def test_a_field_already_as_asked_leaves_the_rest_of_the_change(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """A ticket whose priority is already the one asked still gets the owner and the note
    of the same change (a review found the whole ticket refused), in the dry run and the
    confirmed run alike; a ticket already as asked in every field is listed as failed
    with why."""
    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    high, other = await _tickets(
        settings, "queue = 'billing' AND status = 'open' AND priority <> 'urgent'", 2
    )
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(server, mode=mode) as client:
        await client.call_tool(
            "escalate_ticket", {"ticket_id": high, "priority": "urgent", "reason": "Outage."}
        )
        await client.call_tool("assign_ticket", {"ticket_id": other, "owner": "n.haddad"})
        change = {"priority": "urgent", "owner": "n.haddad", "note": "Taken over."}
        dry = await client.call_tool("bulk_update_tickets", {"ticket_ids": [high, other], **change})
        plan = dry.structured_content
        assert [t["id"] for t in plan["tickets"]] == [high, other], plan
        by_id = {t["id"]: {c["field"] for c in t["changes"]} for t in plan["tickets"]}
        assert by_id == {high: {"owner"}, other: {"priority"}}
        done = await client.call_tool(
            "bulk_update_tickets",
            {**change, "dry_run": False, "plan_token": plan["plan_token"]},
        )
        result = done.structured_content
        assert result["failed"] == [] and result["skipped"] == []
        assert {t["id"]: {c["field"] for c in t["changes"]} for t in result["tickets"]} == by_id
        rows = await _sql(
            settings,
            "SELECT id, priority, owner FROM tickets WHERE id IN (:a, :b) ORDER BY id",
            a=high,
            b=other,
        )
        assert {r[1] for r in rows} == {"urgent"} and {r[2] for r in rows} == {"n.haddad"}
        notes = "SELECT count(*) FROM comments WHERE body = 'Taken over.'"
        assert (await _sql(settings, notes))[0][0] == 2
        again = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": [high], "priority": "urgent"}
        )
        (failed,) = again.structured_content["failed"]
        assert failed["id"] == high and "already has priority urgent" in failed["reason"]


async def test_a_part_already_as_asked_leaves_no_mark_on_the_other_writes_audit_rows(
    settings: Settings, add_caller, server_as
) -> None:
    """A part skipped as already as asked writes nothing, and the audit rows of the writes
    that follow it (the next ticket's) say nothing of it: a review found each of them
    saying 'no change', the skipped part's refusal, though each changed its ticket."""
    import json

    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    urgent, other = await _tickets(
        settings, "queue = 'billing' AND status = 'open' AND priority <> 'urgent'", 2
    )
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(server) as client:
        await client.call_tool(
            "escalate_ticket", {"ticket_id": urgent, "priority": "urgent", "reason": "Outage."}
        )
        change = {"priority": "urgent", "owner": "n.haddad"}
        dry = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": [urgent, other], **change}
        )
        await client.call_tool(
            "bulk_update_tickets",
            {**change, "dry_run": False, "plan_token": dry.structured_content["plan_token"]},
        )
    rows = await audit_rows(settings, caller="lead", tool="bulk_update_tickets")
    writes = [(json.loads(r.change), r.detail) for r in rows if r.change]
    written = sorted(
        (c["ticket_id"], f) for c, _ in writes for f in ("owner", "priority") if f in c["after"]
    )
    assert written == sorted([(urgent, "owner"), (other, "owner"), (other, "priority")]), writes
    assert [d for _, d in writes] == [None, None, None], writes


async def test_the_ticket_story_holds_its_merges_and_bulk_changes(
    settings: Settings, add_caller, server_as
) -> None:
    """`ticket-server audit --ticket ID` (``reports.ticket_story``) lists every call
    naming the ticket, whatever the argument: a merge's source and target, a bulk change's
    ticket_ids, and the per-ticket rows of a bulk change chosen by a search (a review found
    merges and bulk changes missing); `audit --json` rows carry the write's change."""
    from ticket_server.access.callers import open_store
    from ticket_server.admin.commands import _row
    from ticket_server.admin.reports import ticket_story

    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    source, target, by_id = await _tickets(settings, "queue = 'billing' AND status = 'open'", 3)
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(server) as client:
        await client.call_tool(
            "merge_tickets", {"source_ticket_id": source, "target_ticket_id": target}
        )
        change = {"owner": "story.owner"}
        dry = await client.call_tool("bulk_update_tickets", {"ticket_ids": [by_id], **change})
        await client.call_tool(
            "bulk_update_tickets",
            {**change, "dry_run": False, "plan_token": dry.structured_content["plan_token"]},
        )
    store = open_store(settings)
    try:
        stories = {t: await ticket_story(store, t) for t in (source, target, by_id)}
    finally:
        await store.aclose()
    for ticket in (source, target):
        assert any("called merge_tickets: ok" in what for _, _, what, _ in stories[ticket])
    calls = [what for _, _, what, _ in stories[by_id] if "bulk_update_tickets" in what]
    assert len(calls) >= 2, stories[by_id]  # the dry run and the confirmed run
    rows = await audit_rows(settings, tool="bulk_update_tickets")
    written = [_row(r) for r in rows if r.change]
    assert written and all(row["change"]["ticket_id"] == by_id for row in written)


@pytest.mark.slow
@pytest.mark.sqlite_only
async def test_500_tickets_leave_500_audit_rows(settings: Settings, add_caller, server_as) -> None:
    """One change of 500 tickets (by a search), each written and audited as a single
    write: 500 audit rows with their change. (Slow: about 4 s on SQLite here.)"""
    await add_caller("lead", scopes=AGENT_SCOPES)
    ids = await _tickets(settings, "status <> 'closed' AND owner IS NOT NULL", 500)
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(server) as client:
        dry = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": ids, "owner": "bulk.owner"}
        )
        assert len(dry.structured_content["tickets"]) == 500
        started = time.monotonic()
        done = await client.call_tool(
            "bulk_update_tickets",
            {
                "owner": "bulk.owner",
                "dry_run": False,
                "plan_token": dry.structured_content["plan_token"],
            },
        )
        print(f"bulk of 500: {time.monotonic() - started:.2f} s")
    assert len(done.structured_content["tickets"]) == 500
    rows = [r for r in await audit_rows(settings, tool="bulk_update_tickets") if r.change]
    assert len(rows) == 500
    owners = await _sql(settings, "SELECT count(*) FROM tickets WHERE owner = 'bulk.owner'")
    assert owners[0][0] == 500


ASKED: list[str] = []


async def _yes(message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
    assert "Reply every customer receives" in message
    ASKED.append(message)
    return ElicitResult(action="accept", content={"confirm": True})


async def test_a_reply_to_tickets_found_by_search_is_confirmed_once(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """By query, within the caller's queues; the default policy confirms a reply: the
    person is asked once for the plan, the question naming its tickets (the first 20,
    then how many more), then every ticket gets its reply."""
    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET)
    change = {"reply": "Your invoice was corrected."}
    async with Client(server, mode=mode, elicitation_handler=_yes) as client:
        dry = await client.call_tool("bulk_update_tickets", {"query": "invoice", **change})
        plan = dry.structured_content
        ids = [t["id"] for t in plan["tickets"]]
        assert ids
        queues = await _sql(
            settings, f"SELECT DISTINCT queue FROM tickets WHERE id IN ({','.join(map(repr, ids))})"
        )
        assert queues == [("billing",)]
        done = await client.call_tool(
            "bulk_update_tickets", {**change, "dry_run": False, "plan_token": plan["plan_token"]}
        )
    assert [t["id"] for t in done.structured_content["tickets"]] == ids
    question = ASKED.pop()
    assert not ASKED
    named = ", ".join(ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
    assert question.startswith(f"Apply this change to {len(ids)} tickets ({named})?"), question
    replies = await _sql(
        settings,
        "SELECT count(*) FROM comments WHERE body = 'Your invoice was corrected.' "
        "AND visibility = 'public'",
    )
    assert replies[0][0] == len(ids)


async def test_a_confirmed_run_that_would_write_nothing_asks_nobody(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """A confirmed run is asked once; sent again with its idempotency key (every write a
    replay) or its plan_token sent again without one (every ticket changed since), it
    would write nothing, so nobody is asked, as a single write's retry is not (C34,
    C43): a review found the person asked to confirm each time."""
    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    ids = await _tickets(settings, "queue = 'billing' AND status = 'open'", 2)
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET)
    change = {"reply": "Your invoice was corrected."}
    ASKED.clear()
    async with Client(server, mode=mode, elicitation_handler=_yes) as client:
        dry = await client.call_tool("bulk_update_tickets", {"ticket_ids": ids, **change})
        token = dry.structured_content["plan_token"]
        confirmed = {**change, "dry_run": False, "plan_token": token, "idempotency_key": "b-1"}
        done = await client.call_tool("bulk_update_tickets", confirmed)
        assert len(ASKED) == 1
        retried = await client.call_tool("bulk_update_tickets", confirmed)
        assert retried.structured_content == done.structured_content
        again = await client.call_tool(
            "bulk_update_tickets", {**change, "dry_run": False, "plan_token": token}
        )
        assert [s["id"] for s in again.structured_content["skipped"]] == ids
    assert len(ASKED) == 1, ASKED
    ASKED.clear()
    replies = await _sql(
        settings, "SELECT count(*) FROM comments WHERE body = 'Your invoice was corrected.'"
    )
    assert replies[0][0] == 2


async def test_tags_are_added_and_taken_off_as_update_ticket_tags_does(
    settings: Settings, add_caller, server_as, mode: str
) -> None:
    """add_tags/remove_tags on many tickets: the dry run shows each ticket's tags before
    and after, the confirmed run writes them (one audit row each, with the tags), a
    closed ticket refuses them, and a tag outside the vocabulary is refused by name."""
    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    open_ = await _tickets(settings, "queue = 'billing' AND status = 'open'", 3)
    (closed,) = await _tickets(settings, "queue = 'billing' AND status = 'closed'", 1)
    server = server_as(
        stdio_caller="lead", toolsets=[*EVERY_TOOLSET, "classify"], confirm_writes=[]
    )
    change = {"add_tags": ["VIP", "outage"], "remove_tags": ["bug"]}
    async with Client(server, mode=mode) as client:
        await client.call_tool("update_ticket_tags", {"ticket_id": open_[0], "add": ["bug"]})
        dry = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": [*open_, closed], **change}
        )
        plan = dry.structured_content
        assert [t["id"] for t in plan["tickets"]] == open_
        assert [f["id"] for f in plan["failed"]] == [closed]
        first = plan["tickets"][0]["tags"]
        assert "bug" in first["before"] and "bug" not in first["after"]
        assert all({"vip", "outage"} <= set(t["tags"]["after"]) for t in plan["tickets"])
        done = await client.call_tool(
            "bulk_update_tickets",
            {**change, "dry_run": False, "plan_token": plan["plan_token"], "idempotency_key": "t1"},
        )
        result = done.structured_content
        assert result["tickets"] == [{**t, "version": t["version"] + 1} for t in plan["tickets"]]
        unknown = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": open_[:1], "add_tags": ["no-such-tag"]}
        )
        (refused,) = unknown.structured_content["failed"]
        assert "no-such-tag" in refused["reason"]
    for tid in open_:
        tags = await _sql(
            settings,
            "SELECT t.name FROM ticket_tags tt JOIN tags t ON t.id = tt.tag_id "
            "JOIN tickets k ON k.pk = tt.ticket_pk WHERE k.id = :t ORDER BY t.name",
            t=tid,
        )
        assert {"vip", "outage"} <= {r[0] for r in tags} and "bug" not in {r[0] for r in tags}
    rows = [r for r in await audit_rows(settings, tool="bulk_update_tickets") if r.change]
    assert len(rows) == 3 and all("vip" in str(r.change) for r in rows)


async def test_a_plan_token_altered_with_any_character_is_refused_in_words(
    settings: Settings, add_caller, server_as
) -> None:
    """A plan_token altered with a character outside ASCII (a model copying it may well
    write one) is refused as any altered token is, in one sentence: a review found it
    answered "Error calling tool" (Python's "comparing strings with non-ASCII characters
    is not supported" in the log), though an ASCII alteration was told what to do."""
    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    (ticket,) = await _tickets(settings, "queue = 'billing' AND status = 'open'", 1)
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    change = {"ticket_ids": [ticket], "note": "Checked."}
    async with Client(server) as client:
        dry = await client.call_tool("bulk_update_tickets", change)
        token = dry.structured_content["plan_token"]
        payload, _, tag = token.rpartition(".")
        for altered in (f"{payload}.{tag[:-1]}é", f"é{token}", f"{payload}.ｆ{tag[1:]}"):
            refused = await client.call_tool(
                "bulk_update_tickets",
                {"note": "Checked.", "dry_run": False, "plan_token": altered},
                raise_on_error=False,
            )
            assert refused.is_error and "does not match this change" in text_of(refused), (
                altered,
                text_of(refused),
            )
    notes = "SELECT count(*) FROM comments WHERE body = 'Checked.'"
    assert (await _sql(settings, notes))[0][0] == 0


@pytest.mark.one_engine
async def test_the_audit_keeps_a_digest_of_the_plan_token_and_every_argument(
    settings: Settings, add_caller, server_as
) -> None:
    """The audit rows of a confirmed run keep the plan_token as its SHA-256 and length,
    not the token, and so keep the change's own arguments: a review found the token
    copied into every row's arguments, where for 250 tickets (a 5,700-character token)
    it filled the 4,000 characters kept and cut off the arguments after it (`owner`)."""
    import json

    await add_caller("lead", scopes=AGENT_SCOPES)
    ids = await _tickets(settings, "status <> 'closed' AND owner IS NOT NULL", 250)
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    async with Client(server) as client:
        dry = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": ids, "owner": "bulk.owner"}
        )
        token = dry.structured_content["plan_token"]
        assert len(token) > 4000
        await client.call_tool(
            "bulk_update_tickets", {"owner": "bulk.owner", "dry_run": False, "plan_token": token}
        )
    rows = [r for r in await audit_rows(settings, tool="bulk_update_tickets") if r.change]
    assert len(rows) == 250
    for row in rows:
        kept = json.loads(row.arguments)
        assert kept["owner"] == "bulk.owner" and kept["dry_run"] is False
        assert kept["plan_token"] == {
            "sha256": hashlib.sha256(token.encode()).hexdigest(),
            "length": len(token),
        }


async def test_a_confirmed_run_naming_other_tickets_than_its_plan_is_refused(
    settings: Settings, add_caller, server_as
) -> None:
    """The plan_token fixes the tickets; a confirmed run that also names tickets (or a
    query) other than its dry run's is refused in words and changes nothing, where a
    review found the names ignored and the plan's every ticket written. Sent as in the
    dry run, or left out, they are the plan's."""
    await add_caller("lead", scopes=AGENT_SCOPES, queues=["billing"])
    first, second = await _tickets(settings, "queue = 'billing' AND status = 'open'", 2)
    server = server_as(stdio_caller="lead", toolsets=EVERY_TOOLSET, confirm_writes=[])
    notes = "SELECT count(*) FROM comments WHERE body = 'Checked.'"
    async with Client(server) as client:
        dry = await client.call_tool(
            "bulk_update_tickets", {"ticket_ids": [first, second], "note": "Checked."}
        )
        token = dry.structured_content["plan_token"]
        confirm = {"note": "Checked.", "dry_run": False, "plan_token": token}
        for other in ({"ticket_ids": [first]}, {"query": "refund"}):
            refused = await client.call_tool(
                "bulk_update_tickets", {**confirm, **other}, raise_on_error=False
            )
            assert refused.is_error and "not the dry run's" in text_of(refused), text_of(refused)
            assert (await _sql(settings, notes))[0][0] == 0
        done = await client.call_tool(
            "bulk_update_tickets", {**confirm, "ticket_ids": [first, second]}
        )
    assert [t["id"] for t in done.structured_content["tickets"]] == [first, second]
    assert (await _sql(settings, notes))[0][0] == 2
