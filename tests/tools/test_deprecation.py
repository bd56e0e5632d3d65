"""Deprecated originals: the notice, the machine-readable _meta, and retirement by date."""

from __future__ import annotations

import json
from datetime import date

import pytest
from fastmcp import Client

from tests.helpers import text_of
from ticket_server.server import build_server
from ticket_server.tools.versions import META_KEY

SUNSET = "2027-02-28"
ORIGINALS = {"get_ticket_status": "get_ticket_status_v2", "search_tickets": "search_tickets_v2"}
CALLS = {"get_ticket_status": {"ticket_id": "SUP-4412"}, "search_tickets": {"query": "invoice"}}


def at(settings, day: date):
    return build_server(settings, clock=lambda: day)


async def test_four_tools_originals_announce_retirement(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert set(tools) == {
        *ORIGINALS,
        *ORIGINALS.values(),
        "get_ticket",
        "get_customer",
        "get_attachment",
        "count_tickets",
        "find_similar_tickets",
    }
    for name, replacement in ORIGINALS.items():
        first_line = tools[name].description.splitlines()[0]
        assert "DEPRECATED" in first_line and replacement in first_line and SUNSET in first_line
        assert tools[name].meta[META_KEY] == {
            "deprecated": True,
            "replacement": replacement,
            "sunset": SUNSET,
        }
    for current in [*ORIGINALS.values(), "get_ticket", "get_customer"]:
        assert META_KEY not in (tools[current].meta or {})
        assert "DEPRECATED" not in tools[current].description


@pytest.mark.parametrize("name", list(ORIGINALS))
async def test_results_of_deprecated_calls_carry_the_facts(client: Client, name: str) -> None:
    result = await client.call_tool(name, CALLS[name])
    assert result.is_error is False
    assert result.meta[META_KEY]["replacement"] == ORIGINALS[name]
    assert result.meta[META_KEY]["sunset"] == SUNSET


@pytest.mark.parametrize(
    ("day", "retired"),
    [(date(2027, 2, 27), False), (date(2027, 2, 28), True), (date(2030, 1, 1), True)],
)
async def test_retirement_follows_the_clock(settings, mode: str, day: date, retired: bool) -> None:
    async with Client(at(settings, day), mode=mode) as client:
        names = {t.name for t in await client.list_tools()}
        assert set(ORIGINALS.values()) <= names
        assert (not names & set(ORIGINALS)) is retired
        for name, replacement in ORIGINALS.items():
            result = await client.call_tool(name, CALLS[name], raise_on_error=False)
            assert result.is_error is retired
            if retired:
                text = text_of(result)
                assert replacement in text and "retired on 2027-02-28" in text
                assert (
                    ("ticket_id" in text)
                    if name == "get_ticket_status"
                    else ("query" in text and "limit" in text)
                )
                assert result.meta[META_KEY]["replacement"] == replacement
        current = await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert current.is_error is False


async def test_retirement_date_is_one_setting(settings) -> None:
    moved = settings.model_copy(
        update={
            "retirement_dates": {
                "search_tickets": date(2026, 1, 1),
                "get_ticket_status": date(2027, 2, 28),
            }
        }
    )
    async with Client(build_server(moved, clock=lambda: date(2026, 11, 30))) as client:
        names = {t.name for t in await client.list_tools()}
    assert "search_tickets" not in names and "get_ticket_status" in names


@pytest.mark.parametrize(
    ("day", "status"), [(date(2026, 11, 30), "deprecated"), (date(2027, 3, 1), "retired")]
)
async def test_manifest_resource(settings, day: date, status: str) -> None:
    async with Client(at(settings, day)) as client:
        resources = await client.list_resources()
        assert [str(r.uri) for r in resources] == ["tickets://manifest"]
        assert resources[0].mime_type == "application/json"
        contents = await client.read_resource("tickets://manifest")
    manifest = json.loads(contents[0].text)
    assert manifest["server"] == "ticket-server" and manifest["version"]
    tools = {t["name"]: t for t in manifest["tools"]}
    assert tools["get_ticket_status_v2"]["status"] == "current"
    for name, replacement in ORIGINALS.items():
        assert tools[name] == {
            "name": name,
            "status": status,
            "replacement": replacement,
            "sunset": SUNSET,
        }
