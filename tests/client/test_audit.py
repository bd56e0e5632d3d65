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


def plain(**fields) -> ServerConfig:
    fields.setdefault("envelope", LOCKED_READ)
    return ServerConfig(name="plain", transport="stdio", command=kit_server("plain"), **fields)


def records(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "call"]


async def test_one_record_per_call_whatever_its_fate(tmp_path):
    """ok, refused, invalid, cancelled, and a server that cannot be started: one `call`
    record each, with the arguments as a digest and the idempotency key when there is one."""
    import anyio
    import pytest

    from ticket_server.client import CallRefused, InvalidArguments, ServerUnavailable

    events: list[dict] = []
    config = KitConfig(
        servers={
            "plain": plain(
                envelope={**LOCKED_READ, "idempotent": True},
                tools={"echo": ToolConfig(), "stall": ToolConfig(), "flaky": ToolConfig()},
            ),
            "gone": ServerConfig(
                name="gone",
                transport="stdio",
                command=[str(tmp_path / "no-such-program")],
                retries=0,
                tools={"anything": ToolConfig()},
            ),
        }
    )
    async with Kit(config, audit=events.append) as kit:
        await kit.call("plain", "echo", {"text": "ok"})
        with pytest.raises(CallRefused):
            await kit.call("plain", "die", {})
        with pytest.raises(InvalidArguments):
            await kit.call("plain", "echo", {"text": 1})
        with anyio.move_on_after(1):
            await kit.call("plain", "stall", {})
        with pytest.raises(ServerUnavailable):
            await kit.call("gone", "anything", {"x": 1})
        key = "".join(
            b.text
            for b in (await kit.call("plain", "flaky", {"marker": str(tmp_path / "m")})).content
        )
    outcomes = [(r["server"], r["tool"], r["outcome"]) for r in records(events)]
    assert outcomes == [
        ("plain", "echo", "ok"),
        ("plain", "die", "refused"),
        ("plain", "echo", "invalid"),
        ("plain", "stall", "cancelled"),
        ("gone", "anything", "unavailable"),
        ("plain", "flaky", "ok"),
    ]
    assert all(set(r["arguments"]) == {"sha256", "bytes"} for r in records(events))
    flaky = records(events)[-1]
    assert flaky["idempotency_key"] == key and flaky["attempts"] == 2
    assert "could not connect" in records(events)[4]["reason"]


async def test_arguments_are_audited_in_full_only_where_the_configuration_says():
    events: list[dict] = []
    config = KitConfig(
        servers={
            "plain": plain(
                audit_arguments="none",
                tools={"echo": ToolConfig(audit_arguments="full"), "pair": ToolConfig()},
            )
        }
    )
    async with Kit(config, audit=events.append) as kit:
        await kit.call("plain", "echo", {"text": "shown"})
        await kit.call("plain", "pair", {"a": 1, "b": True})
    echo, pair = records(events)
    assert echo["arguments"] == {"text": "shown"} and "arguments" not in pair


async def test_a_notification_is_logged_in_full_under_the_turn_of_the_call_it_came_with():
    events: list[dict] = []
    # Legacy: 2026-07-28 has no logging notifications.
    server = plain(mode="legacy", tools={"echo": ToolConfig(), "log": ToolConfig()})
    async with Kit(
        KitConfig(servers={"plain": server}),
        audit=events.append,
    ) as kit:
        with turn("1" * 32):  # this turn opens the connection
            await kit.call("plain", "echo", {"text": "first"})
        with turn("2" * 32):
            await kit.call("plain", "log", {"text": "from the second turn"})
    (logged,) = [
        e for e in events if e["event"] == "notification" and e["method"] == "notifications/message"
    ]
    assert logged["trace_id"] == "2" * 32
    assert logged["params"]["level"] == "info"
    assert "from the second turn" in json.dumps(logged["params"])


async def _unreachable(**where: object) -> tuple[list[dict], dict, str]:
    """Every event, the connect event and the error of one call to a server that cannot
    be reached at ``where`` (a ``url``, or a ``command`` that exits at once)."""
    import pytest

    from ticket_server.client.session import ServerUnavailable

    events: list[dict] = []
    transport = "http" if "url" in where else "stdio"
    server = ServerConfig(
        name="there",
        transport=transport,
        envelope=LOCKED_READ,
        tools={"echo": ToolConfig()},
        retries=0,
        **where,
    )
    async with Kit(KitConfig(servers={"there": server}), audit=events.append) as kit:
        with pytest.raises(ServerUnavailable) as failed:
            await kit.call("there", "echo", {"text": "x"})
    (connect,) = [e for e in events if e["event"] == "connect"]
    return events, connect, str(failed.value)


async def test_the_connect_event_names_the_url_without_its_credentials():
    """A URL carrying a password or a token (userinfo, a query value) is logged with
    neither: the host and path stay, the secrets do not, nor in the error."""
    events, connect, error = await _unreachable(
        url="http://bob:SECRETPW@127.0.0.1:1/mcp?access_token=SECRETQ"
    )
    assert connect["target"].startswith("http://127.0.0.1:1/mcp?access_token=")
    assert "SECRET" not in json.dumps(events) and "SECRET" not in error


async def test_the_connect_event_names_the_program_but_not_its_arguments():
    """A stdio server's arguments may carry a credential (``--api-key ...``): the connect
    event names the program and how many arguments it was given, never them."""
    import sys

    events, connect, error = await _unreachable(
        command=[sys.executable, "-c", "raise SystemExit(3)", "--api-key", "SECRETARG"]
    )
    assert connect["target"] == f"{sys.executable} (4 arguments, not logged)"
    assert "SECRETARG" not in json.dumps(events) and "SECRETARG" not in error
