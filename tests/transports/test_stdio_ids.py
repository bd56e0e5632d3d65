"""Request ids over stdio (issue 32): an id already in flight on the connection is
refused at once (C31), and what is in flight when stdin ends is answered (C40). A real
`ticket-server serve` process, driven frame by frame."""

from __future__ import annotations

import json
from pathlib import Path

from tests.transports.conftest import WAITING, database_locked, stop, wait_until_waiting
from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio, assert_all_jsonrpc


def _call(request_id: int | str, name: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_c40_requests_in_flight_at_end_of_input_are_answered(db_path: Path) -> None:
    """C40: `initialize`, `tools/list` and a `tools/call` written at once, then stdin
    closed at once: every request is answered with its result (tools/list and the call
    wait for the start-up checks, so they are still running when input ends), exit 0."""
    raw = RawStdio(db_path)
    try:
        frames = [INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
        frames.append(_call(3, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}))
        assert raw.process.stdin is not None
        raw.process.stdin.write(b"".join(json.dumps(f).encode() + b"\n" for f in frames))
        raw.process.stdin.close()  # at once: the server has not even started yet
        raw.process.wait(timeout=90)  # a loaded machine: start-up alone may take 20 s
        raw.close()
        assert raw.process.returncode == 0, raw.stderr()
    finally:
        stop(raw.process)
    assert_all_jsonrpc(raw.lines)
    answers = {m["id"]: m for m in map(json.loads, raw.lines)}
    assert set(answers) == {1, 2, 3}, raw.lines
    assert all("result" in answer for answer in answers.values()), raw.lines
    assert answers[3]["result"]["isError"] is False
    assert any(t["name"] == "get_ticket_status_v2" for t in answers[2]["result"]["tools"])


def test_c31_an_id_in_flight_is_refused_at_once(db_path: Path) -> None:
    """C31 over stdio: while call 10 waits on a locked database, a second request with
    id 10 (a tools/call, then a ping, then "10" as a string) is refused at once with
    -32600 naming the id; call 10 is answered once the database is free, with its own
    result; afterwards id 10 may be used again."""
    raw = RawStdio(db_path, **WAITING)
    database_url = f"sqlite+aiosqlite:///{db_path}"
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        raw.send(_call(2, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}))  # warm
        assert raw.read_until_id(2)["result"]["isError"] is False
        with database_locked(database_url):
            raw.send(_call(10, "search_tickets_v2", {"query": "invoice"}))
            wait_until_waiting(database_url, raw.stderr, "search_tickets_v2", 1)
            for duplicate in (
                _call(10, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}),
                {"jsonrpc": "2.0", "id": 10, "method": "ping"},
                {"jsonrpc": "2.0", "id": "10", "method": "ping"},
            ):
                raw.send(duplicate)
                refused = raw.read(timeout=10)  # the call still waits: this is the refusal
                assert refused["id"] == duplicate["id"], refused
                assert refused["error"]["code"] == -32600, refused
                assert "already in use" in refused["error"]["message"]
        answered = raw.read_until_id(10)
        assert "tickets" in answered["result"]["structuredContent"], answered
        raw.send(_call(10, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}))
        again = raw.read_until_id(10)
        assert again["result"]["structuredContent"]["id"] == "SUP-4412"
        raw.close()
    finally:
        stop(raw.process)
    ids = [json.loads(line).get("id") for line in raw.lines]
    assert ids.count(10) == 4 and ids.count("10") == 1, ids


def test_params_the_sdk_refuses_are_named_in_the_error(db_path: Path) -> None:
    """A tools/call whose `name` is not a string or whose `arguments` is not an object,
    and a prompts/get whose argument is not a text, are refused with -32602 saying which
    member is wrong (the SDK's own answer is "Invalid request parameters" and nothing
    else), as the HTTP gate says it."""
    raw = RawStdio(db_path)
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        sent = {
            2: ("tools/call", {"name": 5, "arguments": {}}),
            3: ("tools/call", {"name": "get_ticket_status_v2", "arguments": "SUP-4412"}),
            4: ("tools/call", {"name": "get_ticket_status_v2", "arguments": ["SUP-4412"]}),
            5: ("prompts/get", {"name": "summarize_ticket", "arguments": {"ticket_id": 5}}),
        }
        errors = {}
        for request_id, (method, params) in sent.items():
            raw.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            errors[request_id] = raw.read_until_id(request_id)["error"]
    finally:
        stop(raw.process)
    assert {e["code"] for e in errors.values()} == {-32602}
    assert "tools/call params.name must be a string" in errors[2]["message"]
    assert "tools/call params.arguments must be an object" in errors[3]["message"]
    assert "tools/call params.arguments must be an object" in errors[4]["message"]
    assert "prompts/get params.arguments must be an object of texts" in errors[5]["message"]
