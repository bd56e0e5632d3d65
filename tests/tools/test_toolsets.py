"""Toolsets (issue 33, item 3): the deployment's choice of tool groups decides what a
caller's model is offered; a tool outside them is neither listed nor callable, on top of
the caller's scopes."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastmcp import Client

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import call_any
from tests.test_operator_cli import one_line, run
from ticket_server.admin import contract
from ticket_server.settings import Settings
from ticket_server.tools.apps import APP_ONLY
from ticket_server.tools.toolsets import TOOLSETS, tools_in

EVERY_SCOPE = ("tickets:read", "tickets:write")


def test_every_published_tool_is_in_exactly_one_toolset() -> None:
    live = asyncio.run(contract.snapshot(contract.contract_server()))
    published = sorted(t["name"] for t in live["tools"] + live.get("app_tools", []))
    grouped = sorted(name for toolset in TOOLSETS.values() for name in toolset.tools)
    assert grouped == published


@pytest.mark.sqlite_only
async def test_only_the_offered_toolsets_are_listed_and_callable(
    settings: Settings,
    add_caller,
    server_as,
) -> None:
    """A caller holding every scope, on a deployment offering `read` only, is listed the
    read tools and nothing else; a write tool is refused exactly like an unknown tool
    (C13's JSON-RPC error), and the manifest lists what tools/list lists."""
    await add_caller("agent", scopes=EVERY_SCOPE)
    server = server_as(stdio_caller="agent", toolsets=["read"])
    async with Client(server) as client:
        listed = {t.name for t in await client.list_tools()}
        assert listed == tools_in(["read"]) - APP_ONLY  # app-only: for MCP Apps clients
        failed, refused = await call_any(
            client, "add_internal_note", {"ticket_id": "SUP-4412", "note": "hello"}
        )
        _, unknown = await call_any(client, "no_such_tool", {})
        assert failed and refused.replace("add_internal_note", "X") == unknown.replace(
            "no_such_tool", "X"
        )
        manifest = json.loads((await client.read_resource("tickets://manifest"))[0].text)
        assert {t["name"] for t in manifest["tools"]} == listed
    (row,) = await audit_rows(settings, tool="add_internal_note")
    assert (row.outcome, row.detail) == ("denied", "not in the toolsets offered to this caller")

    async with Client(server_as(stdio_caller="agent")) as client:  # the default toolsets
        everything = {t.name for t in await client.list_tools()}
    assert everything == tools_in(TOOLSETS) - APP_ONLY


@pytest.mark.sqlite_only
def test_toolsets_command_and_a_misspelt_toolset(settings: Settings) -> None:
    """`tools toolsets` names each toolset, whether the settings offer it, its tokens and
    tools; a toolset name that does not exist is one line naming the setting, exit 2."""
    listed = run(settings.database_url, "tools", "toolsets", TICKET_SERVER_TOOLSETS='["read"]')
    assert listed.returncode == 0, listed.stderr
    assert "read (default, ~" in listed.stdout and "triage (not by default, ~" in listed.stdout
    assert "add_internal_note, reply_to_customer" in listed.stdout
    wrong = run(settings.database_url, "tools", "toolsets", TICKET_SERVER_TOOLSETS='["reed"]')
    assert wrong.returncode == 2
    assert "TICKET_SERVER_TOOLSETS" in one_line(wrong) and "'read'" in one_line(wrong)


@pytest.mark.sqlite_only
async def test_a_callers_own_toolsets_replace_the_deployments(
    settings: Settings,
    add_caller,
    server_as,
) -> None:
    """A caller given `respond` (callers add --toolset) is offered the note and reply
    tools, though the deployment offers `read`; its scopes still decide: a caller with
    the `backlog` and `triage` toolsets but tickets:read only is offered the one read
    among them (count_tickets) and none of the writes."""
    await add_caller("responder", scopes=EVERY_SCOPE, toolsets=["respond"])
    await add_caller("reader", scopes=("tickets:read",), toolsets=["backlog", "triage"])
    async with Client(server_as(stdio_caller="responder", toolsets=["read"])) as client:
        assert {t.name for t in await client.list_tools()} == tools_in(["respond"]) - APP_ONLY
        failed, _ = await call_any(client, "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert failed
    async with Client(server_as(stdio_caller="reader")) as client:
        assert [t.name for t in await client.list_tools()] == ["count_tickets"]


@pytest.mark.sqlite_only
def test_callers_add_toolset_list_and_export(settings: Settings) -> None:
    """`callers add --toolset` stores the caller's toolsets, `callers list --json` shows
    them, `tools export --caller` lists what that caller's model is offered, and an
    unknown toolset is one line naming the choices, exit 2, nothing created."""
    url = settings.database_url
    added = run(
        url, "callers", "add", "lead", "--scope", "tickets:read", "--scope", "tickets:write",
        "--toolset", "triage", "--toolset", "read",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = [
        json.loads(line) for line in run(url, "callers", "list", "--json").stdout.splitlines()
    ]
    assert next(c for c in listed if c["name"] == "lead")["toolsets"] == ["read", "triage"]
    exported = run(url, "tools", "export", "--caller", "lead", "--format", "mcp")
    assert exported.returncode == 0, exported.stderr
    names = {t["name"] for t in json.loads(exported.stdout)["tools"]}
    assert names == tools_in(["read", "triage"]) - APP_ONLY
    wrong = run(url, "callers", "add", "x", "--scope", "tickets:read", "--toolset", "admin")
    assert wrong.returncode == 2
    assert "toolset 'admin': one of read, respond, triage" in one_line(wrong)
    assert "x" not in {
        c["name"]
        for c in (
            json.loads(line) for line in run(url, "callers", "list", "--json").stdout.splitlines()
        )
    }
