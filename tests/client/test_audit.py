"""Audit and tracing: every protocol event as one JSON line under the trace id of the
turn that caused it, to a sink the application gives or to stderr."""

from __future__ import annotations

import json

from tests.client.conftest import kit_server
from ticket_server.client import KitConfig, ServerConfig, ToolConfig, turn
from ticket_server.client.kit import Kit

LOCKED_READ = {"surface": "locked", "side_effecting": False, "reversible": True}


def grow(mode: str = "legacy") -> KitConfig:
    server = ServerConfig(
        name="grow",
        transport="stdio",
        command=kit_server("grow"),
        mode=mode,
        envelope=LOCKED_READ,
        tools={"echo": ToolConfig(), "add_tool": ToolConfig()},
    )
    return KitConfig(servers={"grow": server})


async def test_every_event_of_a_turn_carries_its_trace_id():
    events: list[dict] = []
    async with Kit(grow(), audit=events.append) as kit:
        with turn("a" * 32) as first:
            await kit.call("grow", "add_tool", {"name": "surprise"})
            await kit.call("grow", "echo", {"text": "after"})  # the notification came first
        with turn() as second:
            await kit.call("grow", "echo", {"text": "hello, world"})
    kinds = [e["event"] for e in events]
    assert kinds[:3] == ["connect", "handshake", "list"] and kinds[-1] == "close"
    assert first == "a" * 32 and len(second) == 32 and second != first
    by_turn = [e for e in events if e["trace_id"] == first]
    assert {"connect", "handshake", "list", "call", "notification"} <= {e["event"] for e in by_turn}
    handshake = next(e for e in events if e["event"] == "handshake")
    assert handshake["method"] == "initialize" and handshake["server_name"] == "kit-test-grow"
    listed = next(e for e in events if e["event"] == "list")
    assert listed["tools"] == 2 and listed["inert"] == []
    assert any(
        e["event"] == "notification" and e["method"] == "notifications/tools/list_changed"
        for e in events
    )
    second_calls = [e for e in events if e["trace_id"] == second and e["event"] == "call"]
    assert [(c["tool"], c["outcome"]) for c in second_calls] == [("echo", "ok")]
    assert second_calls[0]["result_bytes"] > len("hello, world") and second_calls[0]["ms"] >= 0
    # By default a call's arguments are audited as a digest only: matchable, not readable.
    assert all("hello" not in json.dumps(e) for e in events), "arguments were logged"
    assert set(second_calls[0]["arguments"]) == {"sha256", "bytes"}


async def test_list_changed_marks_the_listing_stale_and_the_new_tool_shows_inert():
    events: list[dict] = []
    async with Kit(grow(), audit=events.append) as kit:
        await kit.call("grow", "add_tool", {"name": "surprise"})
        await kit.call("grow", "echo", {"text": "after"})
        listed = {t.name: t.pinned for t in await kit.tools("grow")}  # no refresh asked
    assert listed == {"echo": True, "add_tool": True, "surprise": False}
    relisted = [e for e in events if e["event"] == "list"][-1]
    assert relisted["new"] == ["surprise"] and relisted["inert"] == ["surprise"]


async def test_the_default_sink_is_json_lines_on_stderr(capfd):
    async with Kit(grow()) as kit:
        with turn("b" * 32):
            await kit.call("grow", "echo", {"text": "x"})
    out, err = capfd.readouterr()
    assert out == ""
    ours = [json.loads(line) for line in err.splitlines() if line.startswith('{"ts":')]
    assert {"connect", "handshake", "list", "call", "close"} <= {e["event"] for e in ours}
    assert all(
        e["trace_id"] == "b" * 32
        for e in ours
        if e["event"] in ("connect", "handshake", "list", "call")
    )
