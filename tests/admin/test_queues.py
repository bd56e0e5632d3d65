"""`ticket-server queues add | list | deactivate | activate` (issue 33), on SQLite and
PostgreSQL, through the command's parser and dispatch: each mistake one line and exit 2,
nothing deleted; a deactivated queue takes no new ticket and no escalation, and its
tickets stay; completions of queues come from the table."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from fastmcp import Client
from mcp.types import PromptReference

from tests.access.conftest import add_caller, server_as  # noqa: F401  (fixtures)
from tests.tools.test_writes import AGENT_SCOPES, _sql, ticket_in
from ticket_server.admin import CommandError
from ticket_server.cli import build_parser
from ticket_server.settings import Settings


async def _run(
    settings: Settings, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """The command as ``main`` runs it (parsed, dispatched, a ``CommandError`` printed as
    one line with exit status 2), without reconfiguring this process's logging; in a
    thread, as the command runs its own event loop."""

    def run() -> int:
        parsed = build_parser().parse_args(["queues", *args])
        try:
            parsed.handler(settings, parsed)
        except CommandError as exc:
            print(f"ticket-server: {exc}", file=sys.stderr)
            return 2
        return 0

    code = await asyncio.to_thread(run)
    out, err = capsys.readouterr()
    return code, out, err


async def test_queue_commands_and_an_inactive_queue(
    settings: Settings,
    add_caller,
    server_as,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        await _run(settings, capsys, "add", "Customer_Success", "--time-zone", "Europe/Berlin")
    )[0] == 0
    for args, said in [
        (("add", "customer_success"), "a queue named 'customer_success' exists"),
        (("add", "bad name!"), "queue name 'bad name!'"),
        (("add", "later", "--time-zone", "Mars/Base"), "unknown time zone 'Mars/Base'"),
        (("deactivate", "nowhere"), "no queue named 'nowhere'"),
    ]:
        code, out, err = await _run(settings, capsys, *args)
        lines = err.strip().splitlines()
        assert code == 2 and out == "" and len(lines) == 1 and said in lines[0], (args, err)
    assert (await _run(settings, capsys, "deactivate", "onboarding"))[0] == 0
    code, _, err = await _run(settings, capsys, "deactivate", "onboarding")
    assert code == 2 and "deactivated already" in err
    code, out, _ = await _run(settings, capsys, "list", "--json")
    listed = {q["name"]: q for q in map(json.loads, out.splitlines())}
    assert listed["customer_success"] == {
        "name": "customer_success",
        "display_name": "Customer success",
        "description": "",
        "time_zone": "Europe/Berlin",
        "active": True,
    }
    assert listed["onboarding"]["active"] is False and listed["billing"]["active"] is True
    # Nothing was deleted: the inactive queue keeps its tickets.
    kept = await _sql(settings, "SELECT count(*) FROM tickets WHERE queue = 'onboarding'")
    assert kept[0][0] > 0

    await add_caller("agent", scopes=AGENT_SCOPES)
    billing = await ticket_in(settings, "billing")
    async with Client(server_as(stdio_caller="agent", confirm_writes=[])) as client:
        moved = await client.call_tool(
            "escalate_ticket",
            {"ticket_id": billing, "reason": "wrong team", "queue": "Onboarding"},
            raise_on_error=False,
        )
        assert moved.is_error and "inactive" in moved.content[0].text  # type: ignore[union-attr]
        # A queue added by the operator takes tickets before it holds any.
        opened = await client.call_tool(
            "open_ticket",
            {
                "subject": "Kick-off call",
                "body": "Please call us.",
                "queue": "customer_success",
                "customer_id": "CUS-1000",
            },
        )
        assert opened.structured_content["ticket"]["queue_display_name"] == "Customer success"
        triage = PromptReference(type="ref/prompt", name="triage_queue")
        completed = await client.complete(triage, {"name": "queue", "value": ""})
    # From the table: the new queue (no ticket yet) is offered, the inactive one is not.
    assert "customer_success" in completed.values and "onboarding" not in completed.values
    assert (await _run(settings, capsys, "activate", "onboarding"))[0] == 0
