"""Tags and custom fields through the in-memory client, on SQLite and PostgreSQL:
update_ticket_tags and set_ticket_fields (each field type, every refusal changing
nothing, the caller's queues, the audit row in the write's transaction, idempotency,
confirmation), the reads (get_ticket) and the search filters (search_tickets_v2)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastmcp import Client

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import call_any
from tests.tools.test_governed_writes import Person
from tests.tools.test_writes import _sql, ticket_in
from ticket_server.admin import classification as admin
from ticket_server.settings import Settings

SCOPES = ("tickets:read", "tickets:write")


@pytest.fixture
async def agent(settings: Settings, add_caller, server_as):
    """A server whose caller reads and writes in billing and engineering; no confirmation."""
    await add_caller("agent", scopes=SCOPES, queues=["billing", "engineering"])
    return server_as(stdio_caller="agent", confirm_writes=[])


async def classification(settings: Settings, ticket_id: str) -> tuple[Any, ...]:
    """The ticket's tags, field values and version, straight from the tables."""
    tags = await _sql(
        settings,
        "SELECT g.name FROM ticket_tags t JOIN tags g ON g.id = t.tag_id "
        "JOIN tickets k ON k.pk = t.ticket_pk WHERE k.id = :t ORDER BY g.name",
        t=ticket_id,
    )
    values = await _sql(
        settings,
        "SELECT f.name, v.value_text, v.value_number, v.value_date, v.value_bool "
        "FROM ticket_field_values v JOIN custom_fields f ON f.id = v.field_id "
        "JOIN tickets k ON k.pk = v.ticket_pk WHERE k.id = :t ORDER BY f.name",
        t=ticket_id,
    )
    version = await _sql(settings, "SELECT version FROM tickets WHERE id = :t", t=ticket_id)
    return [r[0] for r in tags], [tuple(r) for r in values], version[0][0]


async def test_tag_and_untag_audited_in_the_write(settings: Settings, agent) -> None:
    billing = await ticket_in(settings, "billing")
    before, _, version = await classification(settings, billing)
    async with Client(agent) as client:
        added = await client.call_tool(
            "update_ticket_tags",
            {"ticket_id": billing, "add": [" VIP ", "Refund"], "expected_version": version},
        )
        data = added.structured_content
        assert data["tags"] == sorted(set(before) | {"vip", "refund"})
        assert data["ticket"]["version"] == version + 1
        assert data["after"]["tags"] == data["tags"] and data["before"]["tags"] == before
        removed = await client.call_tool(
            "update_ticket_tags", {"ticket_id": billing, "remove": ["vip", "sso"]}
        )
        assert removed.structured_content["tags"] == sorted(
            (set(before) | {"refund"}) - {"vip", "sso"}
        )
        read = await client.call_tool("get_ticket", {"ticket_id": billing, "fields": ["tags"]})
        assert read.structured_content == {
            "id": billing,
            "tags": removed.structured_content["tags"],
        }
        again, text = await call_any(
            client, "update_ticket_tags", {"ticket_id": billing, "add": ["refund"]}
        )
        assert again and "already has these tags" in text
    tags, _, now = await classification(settings, billing)
    assert tags == removed.structured_content["tags"] and now == version + 2
    rows = [r for r in await audit_rows(settings, caller="agent") if r.tool == "update_ticket_tags"]
    assert [r.outcome for r in rows] == ["ok", "ok", "tool_error"]
    change = json.loads(rows[0].change)
    assert change["ticket_id"] == billing and change["version"] == version + 1
    assert change["after"]["tags"] == data["tags"] and rows[2].detail == "no change"


async def test_set_each_field_type_and_clear(settings: Settings, agent) -> None:
    engineering = await ticket_in(settings, "engineering")
    billing = await ticket_in(settings, "billing")
    async with Client(agent) as client:
        done = await client.call_tool(
            "set_ticket_fields",
            {
                "ticket_id": engineering,
                "fields": {
                    "severity": "SEV2",
                    "affected_users": 12,
                    "due_date": "2026-12-10",
                    "external_ref": "JIRA-77",
                },
            },
        )
        shown = done.structured_content["custom_fields"]
        assert {
            k: shown[k] for k in ("severity", "affected_users", "due_date", "external_ref")
        } == {
            "severity": "sev2",
            "affected_users": 12,
            "due_date": "2026-12-10",
            "external_ref": "JIRA-77",
        }
        risk = await client.call_tool(
            "set_ticket_fields", {"ticket_id": billing, "fields": {"renewal_risk": True}}
        )
        assert risk.structured_content["custom_fields"]["renewal_risk"] is True
        cleared = await client.call_tool(
            "set_ticket_fields",
            {"ticket_id": engineering, "fields": {"affected_users": None, "due_date": None}},
        )
        assert cleared.structured_content["after"]["custom_fields"] == {
            "affected_users": None,
            "due_date": None,
        }
        read = await client.call_tool("get_ticket", {"ticket_id": engineering})
        fields = read.structured_content["custom_fields"]
        assert "affected_users" not in fields and fields["severity"] == "sev2"
        # The resource is get_ticket with every field: the tags and fields too.
        resource = await client.read_resource(f"tickets://ticket/{engineering}")
        value = json.loads(resource[0].text)
        assert value["custom_fields"] == fields
        assert value["tags"] == read.structured_content["tags"]
    _, values, _ = await classification(settings, engineering)
    stored = {v[0]: v[1:] for v in values}
    assert stored["severity"][0] == "sev2" and "affected_users" not in stored
    rows = [r for r in await audit_rows(settings, caller="agent") if r.tool == "set_ticket_fields"]
    assert [r.outcome for r in rows] == ["ok", "ok", "ok"]
    assert json.loads(rows[1].change)["after"] == {"custom_fields": {"renewal_risk": True}}


async def test_refusals_change_nothing(settings: Settings, agent) -> None:
    engineering = await ticket_in(settings, "engineering")
    support = await ticket_in(settings, "support")
    await asyncio.to_thread(
        admin.fields_add, settings, "component", "text", None, None, True, ["engineering"]
    )
    await asyncio.to_thread(admin.fields_deactivate, settings, "external_ref")
    await asyncio.to_thread(admin.tags_deactivate, settings, "onboarding-call")
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("set_ticket_fields", {"fields": {"affected_users": "12"}}, "is a number"),
        ("set_ticket_fields", {"fields": {"renewal_risk": True}}, "does not apply"),
        ("set_ticket_fields", {"fields": {"severity": 1}}, "one of sev1, sev2, sev3, sev4"),
        ("set_ticket_fields", {"fields": {"severity": "sev9"}}, "not among them"),
        ("set_ticket_fields", {"fields": {"due_date": "2026-13-01"}}, "a date YYYY-MM-DD"),
        ("set_ticket_fields", {"fields": {"colour": "red"}}, "There is no field 'colour'"),
        ("set_ticket_fields", {"fields": {"component": None}}, "is required"),
        ("set_ticket_fields", {"fields": {"due_date": "2026-01-02", "severity": "x"}}, "sev1"),
        ("set_ticket_fields", {"fields": {"external_ref": "R-1"}}, "is deactivated"),
        ("update_ticket_tags", {"add": ["onboarding-call"]}, "is deactivated"),
        ("update_ticket_tags", {"add": ["no-such-tag"]}, "not in this deployment's vocabulary"),
        ("update_ticket_tags", {"add": ["vip"], "remove": ["VIP"]}, "both added and removed"),
        ("update_ticket_tags", {"add": ["bad,tag"]}, "not a tag name"),
    ]
    before = await classification(settings, engineering)
    elsewhere = await classification(settings, support)
    async with Client(agent) as client:
        for tool, arguments, expected in cases:
            is_error, text = await call_any(client, tool, {"ticket_id": engineering, **arguments})
            assert is_error and expected in text, (arguments, text)
            assert "Nothing was changed" in text
        # Another queue's ticket: not this caller's to change.
        is_error, text = await call_any(
            client, "update_ticket_tags", {"ticket_id": support, "add": ["vip"]}
        )
        assert is_error and "No ticket" in text
        # Required on open: the domain's rule for a ticket being opened (open_ticket).
        done, text = await call_any(
            client, "set_ticket_fields", {"ticket_id": engineering, "fields": {"component": "api"}}
        )
        assert not done, text
    after = await classification(settings, engineering)
    assert after[0] == before[0] and after[2] == before[2] + 1  # only the last write landed
    assert await classification(settings, support) == elsewhere
    rows = await audit_rows(settings, caller="agent")
    assert [r.outcome for r in rows if r.tool in {"set_ticket_fields", "update_ticket_tags"}] == [
        "tool_error"
    ] * (len(cases) + 1) + ["ok"]


async def test_free_tags_join_the_vocabulary(settings: Settings, add_caller, server_as) -> None:
    await add_caller("agent", scopes=SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    async with Client(server_as(stdio_caller="agent", free_tags=True)) as client:
        done = await client.call_tool(
            "update_ticket_tags", {"ticket_id": billing, "add": ["Brand New"]}
        )
        assert "brand new" in done.structured_content["tags"]
    assert await _sql(settings, "SELECT active FROM tags WHERE name = 'brand new'") == [(True,)]


async def test_idempotency_version_and_confirmation(
    settings: Settings, add_caller, server_as
) -> None:
    await add_caller("agent", scopes=SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    server = server_as(stdio_caller="agent", confirm_writes=["set_ticket_fields"])
    arguments = {"ticket_id": billing, "add": ["outage"], "idempotency_key": "k-1"}
    async with Client(server) as client:
        first = await client.call_tool("update_ticket_tags", arguments)
        second = await client.call_tool("update_ticket_tags", arguments)
        assert second.structured_content == first.structured_content
        assert (second.meta or {}).get("dev.ticket-server/replay") is True
        stale, text = await call_any(
            client,
            "update_ticket_tags",
            {"ticket_id": billing, "add": ["sso"], "expected_version": 1},
        )
        assert stale and "changed since version 1" in text
        before = await classification(settings, billing)
        # The policy confirms set_ticket_fields; this client cannot be asked.
        asked, text = await call_any(
            client, "set_ticket_fields", {"ticket_id": billing, "fields": {"renewal_risk": False}}
        )
        assert asked and "needs a person's confirmation" in text
        assert await classification(settings, billing) == before
    person = Person()
    async with Client(server, mode="legacy", elicitation_handler=person) as client:
        done = await client.call_tool(
            "set_ticket_fields", {"ticket_id": billing, "fields": {"renewal_risk": False}}
        )
        assert done.structured_content["custom_fields"]["renewal_risk"] is False
    (question,) = person.asked
    assert question.startswith(f"Change custom fields of {billing}?")
    assert '"renewal_risk": false' in question
    rows = [r for r in await audit_rows(settings, caller="agent") if r.tool == "set_ticket_fields"]
    assert json.loads(rows[-1].change)["confirmation"] == "accepted"


async def test_search_filters_by_tag_and_field(settings: Settings, agent) -> None:
    async with Client(agent) as client:
        page = await client.call_tool(
            "search_tickets_v2", {"tags": ["VIP"], "limit": 50, "sort": "newest"}
        )
        hits = [t["id"] for t in page.structured_content["tickets"]]
        holders = await _sql(
            settings,
            "SELECT k.id FROM tickets k JOIN ticket_tags t ON t.ticket_pk = k.pk "
            "JOIN tags g ON g.id = t.tag_id WHERE g.name = 'vip' "
            "AND k.queue IN ('billing', 'engineering')",
        )
        assert hits and set(hits) <= {r[0] for r in holders}
        severe = await client.call_tool(
            "search_tickets_v2",
            {
                "query": "export",
                "fields": [{"name": "severity", "value": "sev1"}],
                "queue": "engineering",
            },
        )
        found = [t["id"] for t in severe.structured_content["tickets"]]
        sev1 = await _sql(
            settings,
            "SELECT k.id FROM tickets k JOIN ticket_field_values v ON v.ticket_pk = k.pk "
            "JOIN custom_fields f ON f.id = v.field_id "
            "WHERE f.name = 'severity' AND v.value_text = 'sev1'",
        )
        assert found and set(found) <= {r[0] for r in sev1}
        for arguments, expected in (
            ({"tags": ["nope"]}, "There is no tag 'nope'"),
            ({"fields": [{"name": "colour", "value": "red"}]}, "There is no field 'colour'"),
            ({"fields": [{"name": "affected_users", "value": "many"}]}, "is a number"),
        ):
            is_error, text = await call_any(client, "search_tickets_v2", arguments)
            assert is_error and expected in text, text


async def test_tag_and_field_resources_and_completions(settings: Settings, agent) -> None:
    from mcp.types import ResourceTemplateReference

    tag = ResourceTemplateReference(type="ref/resource", uri="tickets://tag/{name}")
    field = ResourceTemplateReference(type="ref/resource", uri="tickets://field/{name}/{value}")
    async with Client(agent) as client:
        assert (await client.complete(tag, {"name": "name", "value": "s"})).values == ["sso"]
        names = (await client.complete(field, {"name": "name", "value": "d"})).values
        assert names == ["due_date"]
        values = await client.complete(
            field, {"name": "value", "value": "SEV"}, {"name": "severity"}
        )
        assert values.values == ["sev1", "sev2", "sev3", "sev4"]
        vip = json.loads((await client.read_resource("tickets://tag/vip"))[0].text)
        assert vip["name"] == "vip" and vip["tickets"]
        assert {t["queue"] for t in vip["tickets"]} <= {"billing", "engineering"}
        sev = json.loads((await client.read_resource("tickets://field/severity/sev1"))[0].text)
        assert sev["values"] == ["sev1", "sev2", "sev3", "sev4"] and sev["tickets"]
        assert {t["queue"] for t in sev["tickets"]} == {"engineering"}
        for uri in ("tickets://tag/nope", "tickets://field/severity/sev9"):
            with pytest.raises(Exception, match="Unknown resource|not found"):
                await client.read_resource(uri)


async def test_a_ticket_with_long_fields_stays_within_the_page(settings: Settings, agent) -> None:
    """get_ticket's 16 KiB: long text fields take the room of the oldest comments shown,
    which the conversation then says it left out (truncated, next_cursor)."""
    for n in range(5):
        await asyncio.to_thread(
            admin.fields_add, settings, f"notes_{n}", "text", None, None, False, None
        )
    rows = await _sql(
        settings,
        "SELECT t.id FROM tickets t JOIN comments c ON c.ticket_id = t.id "
        "WHERE t.queue = 'billing' AND t.status IN ('open', 'in_progress') "
        "GROUP BY t.id ORDER BY count(*) DESC LIMIT 1",
    )
    busy = rows[0][0]
    async with Client(agent) as client:
        full = await client.call_tool("get_ticket", {"ticket_id": busy, "limit": 50})
        shown = full.structured_content["conversation"]["returned"]
        too_much, text = await call_any(
            client,
            "set_ticket_fields",
            {"ticket_id": busy, "fields": {f"notes_{n}": "x" * 1000 for n in range(5)}},
        )
        assert too_much and "at most 4000 bytes" in text
        await client.call_tool(
            "set_ticket_fields",
            {"ticket_id": busy, "fields": {f"notes_{n}": "x" * 900 for n in range(4)}},
        )
        read = await client.call_tool("get_ticket", {"ticket_id": busy, "limit": 50})
        resource = await client.read_resource(f"tickets://ticket/{busy}")
    value = read.structured_content
    assert len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()) <= 16_384
    assert len(value["custom_fields"]) >= 4
    assert value["conversation"]["returned"] <= shown
    assert len(resource[0].text.encode()) <= 16_384
    assert json.loads(resource[0].text)["custom_fields"] == value["custom_fields"]


def test_fit_page_leaves_out_the_oldest_comments_and_says_so() -> None:
    from ticket_server.tools.classification_reads import fit_page

    comments = [{"body": "c" * 100, "n": n} for n in range(5)]
    value = {
        "id": "SUP-1",
        "custom_fields": {"notes": "x" * 300},
        "conversation": {
            "comments": list(comments),
            "total": 9,
            "returned": 5,
            "truncated": True,
            "next_cursor": "old",
        },
    }
    fit_page(value, comments, lambda c: f"before-{c['n']}", 700)
    conversation = value["conversation"]
    assert len(json.dumps(value, separators=(",", ":")).encode()) <= 700
    assert conversation["returned"] == len(conversation["comments"]) < 5
    assert conversation["truncated"] is True
    assert conversation["next_cursor"] == f"before-{conversation['returned'] - 1}"
