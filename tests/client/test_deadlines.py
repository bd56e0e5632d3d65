"""Deadlines that bound the whole call: waiting for another task's listing, connecting to
a server that never finishes its handshake, every retry and the backoff between them;
the time a person spends answering is not counted, and the record says how long it
was; progress reaches a callback. Against server-everything (npm), servers.py and the
elicitation of our confirm stand-in."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.client.conftest import REVISIONS, everything, kit_server
from ticket_server.client import KitConfig, ServerConfig, ToolConfig, turn
from ticket_server.client.kit import ApprovalRequest, Kit
from ticket_server.client.session import CallTimeout, ServerUnavailable

LOCKED_READ = {"surface": "locked", "side_effecting": False, "reversible": True}
IDEMPOTENT = {**LOCKED_READ, "idempotent": True}


def one(server: ServerConfig) -> KitConfig:
    return KitConfig(servers={server.name: server})


def plain(**options: Any) -> ServerConfig:
    """The ``plain`` test server over stdio, with ``options``."""
    return ServerConfig(name="plain", transport="stdio", command=kit_server("plain"), **options)


def records(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "call"]


async def test_a_pending_relisting_counts_against_the_callers_deadline():
    server = ServerConfig(
        name="slow",
        transport="stdio",
        command=kit_server("slowlist"),
        envelope=LOCKED_READ,
        tools={"echo": ToolConfig()},
    )
    async with Kit(one(server), audit=lambda e: None) as kit:
        await kit.tools("slow")  # the first listing is quick; every later one takes 5 s
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: kit.tools("slow", refresh=True))
            await anyio.sleep(0.3)
            kit._stale.add("slow")
            started = time.monotonic()
            with pytest.raises(CallTimeout, match="no answer within"):
                await kit.call("slow", "echo", {"text": "x"}, deadline_seconds=1)
            took = time.monotonic() - started
            tg.cancel_scope.cancel()
    assert took < 1.6, f"a 1 s call took {took:.1f} s while a listing was pending"


async def test_a_server_that_never_finishes_its_handshake_fails_the_call_at_its_deadline():
    events: list[dict] = []
    mute = ServerConfig(
        name="mute",
        transport="stdio",
        command=kit_server("mute"),
        envelope=IDEMPOTENT,
        tools={"echo": ToolConfig()},
    )
    async with Kit(one(mute), audit=events.append) as kit:
        started = time.monotonic()
        with pytest.raises(CallTimeout, match="no connection was established"):
            await kit.call("mute", "echo", {"text": "x"}, deadline_seconds=2)
        took = time.monotonic() - started
    assert 1.9 < took < 2.6, f"a 2 s call took {took:.1f} s"
    (record,) = records(events)
    assert record["outcome"] == "timeout" and record["arguments"]["bytes"] > 0


async def test_retries_share_the_deadline_and_back_off_with_jitter(monkeypatch):
    drawn: list[tuple[float, float]] = []
    real = __import__("random").uniform

    def uniform(low: float, high: float) -> float:
        drawn.append((low, high))
        return real(low, high)

    monkeypatch.setattr("ticket_server.client.kit.random.uniform", uniform)
    events: list[dict] = []
    server = plain(
        envelope=IDEMPOTENT,
        retries=5,
        retry_backoff_seconds=0.1,
        tools={"stall": ToolConfig(), "die": ToolConfig()},
    )
    async with Kit(one(server), audit=events.append) as kit:
        await kit.tools("plain")
        started = time.monotonic()
        with pytest.raises(CallTimeout):
            await kit.call("plain", "stall", deadline_seconds=1)
        stalled = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises((ServerUnavailable, CallTimeout)):
            await kit.call("plain", "die", deadline_seconds=6)
        died = time.monotonic() - started
    assert stalled < 1.5, f"a 1 s call that stalls took {stalled:.1f} s (retries multiplied it)"
    assert died < 6.5
    attempts = [e for e in events if e["event"] == "attempt" and e["tool"] == "die"]
    assert len(attempts) >= 2
    assert drawn[: len(attempts) - 1] == [(0, 0.1 * 2**i) for i in range(len(attempts) - 1)]
    assert records(events)[-1]["attempts"] == len(attempts)


async def test_a_deadline_not_above_0_is_refused_and_none_is_the_configured_one():
    """A review found deadline_seconds=0 falling back to the configured deadline and -1
    reported as a CallTimeout: a value that is not a finite number above 0 is a
    ValueError before anything is listed or sent; None is the tool's deadline."""
    events: list[dict] = []
    server = plain(
        envelope=LOCKED_READ, deadline_seconds=7, tools={"echo": ToolConfig(deadline_seconds=3)}
    )
    async with Kit(one(server), audit=events.append) as kit:
        for bad in (0, -1, float("nan"), float("inf"), True, 10**400):
            with pytest.raises(ValueError, match=r"deadline_seconds=.*finite number .* above 0"):
                await kit.call("plain", "echo", {"text": "x"}, deadline_seconds=bad)
        assert events == []
        await kit.call("plain", "echo", {"text": "x"}, deadline_seconds=None)
        await kit.call("plain", "echo", {"text": "x"}, deadline_seconds=5)
    assert [r["deadline_seconds"] for r in records(events)] == [3, 5]


def confirm(mode: str) -> KitConfig:
    return one(
        ServerConfig(
            name="billing",
            transport="stdio",
            command=kit_server("confirm"),
            mode=mode,
            envelope=LOCKED_READ,
            tools={"refund": ToolConfig()},
        )
    )


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
async def test_time_a_person_spends_answering_is_not_counted_and_is_said(mode, revision, method):
    async def slow_person(request: ApprovalRequest):
        await anyio.sleep(1.5)
        return True

    events: list[dict] = []
    async with Kit(confirm(mode), approve=slow_person, audit=events.append) as kit:
        await kit.tools("billing")
        result = await kit.call("billing", "refund", {"amount": 5}, deadline_seconds=1.2)
    assert "".join(b.text for b in result.content) == "refunded 5"
    (record,) = records(events)
    # Asked twice (the call: refund is annotated destructive; then the server's question).
    assert record["outcome"] == "ok" and record["person_ms"] >= 3000
    assert record["ms"] < 3000


async def test_a_person_answering_server_everything_does_not_time_the_call_out(
    reference_servers: Path,
):
    async def slow_person(request: ApprovalRequest):
        await anyio.sleep(1.5 if request.kind == "elicitation" else 0)
        return True if request.kind == "call" else {"name": "Ada"}

    server = everything(
        reference_servers, envelope=LOCKED_READ, tools={"trigger-elicitation-request": ToolConfig()}
    )
    events: list[dict] = []
    async with Kit(one(server), approve=slow_person, audit=events.append) as kit:
        await kit.tools("everything")
        result = await kit.call("everything", "trigger-elicitation-request", deadline_seconds=1)
    assert '"name": "Ada"' in "".join(b.text for b in result.content)
    assert records(events)[0]["person_ms"] >= 1500


async def test_progress_is_requested_and_reaches_the_callback(reference_servers: Path):
    server = everything(
        reference_servers,
        envelope=LOCKED_READ,
        tools={"trigger-long-running-operation": ToolConfig()},
    )
    seen: list[tuple[float, float | None]] = []
    events: list[dict] = []
    async with Kit(one(server), audit=events.append) as kit:
        with turn("c" * 32):
            await kit.call(
                "everything",
                "trigger-long-running-operation",
                {"duration": 1, "steps": 3},
                on_progress=lambda progress, total, message: seen.append((progress, total)),
            )
    assert seen == [(1, 3), (2, 3), (3, 3)]
    progress = [e for e in events if e["event"] == "progress"]
    assert len(progress) == 3 and {e["trace_id"] for e in progress} == {"c" * 32}
