"""Refusals answered at a pace (issue 32): a client that retries a refusal at once is
answered no faster than `TICKET_SERVER_REFUSALS_PER_SECOND` a second, per caller or,
without a valid token, per address, so it cannot keep the event loop busy refusing
it. Checked on the turns themselves, then over a real HTTP server on loopback, where
the refusals of one burst arrive spread over the time their turns take (a lower bound:
answered at once, they would all arrive within milliseconds)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import httpx2 as httpx

from tests.access.conftest import MODERN_META, modern_call
from tests.transports.conftest import add_caller, audit_records, start_http_server, stop
from ticket_server.access.pacing import HOLD_SECONDS, RefusalPace

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
JSON = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/list",
}


def test_each_key_takes_turns_apart_and_waits_at_most_the_hold() -> None:
    """Turns 0.25 s apart per key, the first at once; once the hold is full, a refusal
    waits the hold and up to a second more, without pushing the turns further out."""
    now = [100.0]
    pace = RefusalPace(4, clock=lambda: now[0])
    assert [pace.reserve("caller:a") for _ in range(3)] == [0.0, 0.25, 0.5]
    assert pace.reserve("address:10.0.0.1") == 0.0  # another key: its own turns
    now[0] += 10  # the turns have passed: answered at once again
    turns = [pace.reserve("caller:a") for _ in range(40)]
    within = int(HOLD_SECONDS / 0.25) + 1
    assert turns[:within] == [n * 0.25 for n in range(within)]
    assert all(HOLD_SECONDS < wait < HOLD_SECONDS + 1 for wait in turns[within:])
    now[0] += HOLD_SECONDS  # the last turn given is now: the next one comes after it
    assert pace.reserve("caller:a") == 0.25
    assert RefusalPace(0).reserve("caller:a") == RefusalPace(0).reserve("caller:a") == 0.0


def _arrivals(send, count: int) -> tuple[list[float], list[httpx.Response], float]:
    """``count`` calls of ``send`` at once (one connection each): the seconds from the
    start to each answer, in order, the answers, and the start (``time.monotonic``)."""
    started = time.monotonic()

    def one(_: int) -> tuple[float, httpx.Response]:
        answer = send()
        return time.monotonic() - started, answer

    with ThreadPoolExecutor(count) as pool:
        done = sorted(pool.map(one, range(count)), key=lambda pair: pair[0])
    return [t for t, _ in done], [a for _, a in done], started


def test_a_burst_of_refusals_is_answered_at_the_pace(db_path: Path, tmp_path: Path) -> None:
    """Two refusals a second: a caller past its HTTP limit sending 6 requests at once
    gets six 429s over at least 2.5 s (its turns 0.5 s apart), each still saying when
    to retry, while another caller is served in the middle of them; 6 requests without
    a token from one address get six 401s likewise, and six with two credentials six
    400s."""
    flooder = add_caller(db_path, "flooder", http_rate_limit="1/minute")
    other = add_caller(db_path, "other")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_REFUSALS_PER_SECOND="2")
    try:
        auth = {**JSON, "Authorization": f"Bearer {flooder}"}
        assert httpx.post(server.url, json=LIST, headers=auth).status_code == 200
        with ThreadPoolExecutor(1) as side:
            burst = side.submit(
                _arrivals, lambda: httpx.post(server.url, json=LIST, headers=auth), 6
            )
            time.sleep(0.3)
            served = httpx.post(
                server.url, json=LIST, headers={**JSON, "Authorization": f"Bearer {other}"}
            )
            served_at = time.monotonic()
            took, answers, started = burst.result()
        assert served.status_code == 200 and served.json()["result"]["tools"]
        assert served_at < started + took[-1], (served_at - started, took)
        assert [a.status_code for a in answers] == [429] * 6, [a.text for a in answers]
        assert took[-1] >= 2.4, took
        assert all(int(a.headers["retry-after"]) >= 1 for a in answers)

        took, answers, _ = _arrivals(lambda: httpx.post(server.url, json=LIST, headers=JSON), 6)
        assert [a.status_code for a in answers] == [401] * 6, [a.text for a in answers]
        assert took[-1] >= 2.4, took

        # Every refusal of the gate waits its turn: two credentials are a 400, at once
        # before, without the address's limit or its pace (issue 32's attack).
        twice = {**JSON, "Authorization": "Bearer a b"}
        took, answers, _ = _arrivals(lambda: httpx.post(server.url, json=LIST, headers=twice), 6)
        assert [a.status_code for a in answers] == [400] * 6, [a.text for a in answers]
        assert took[-1] >= 2.4, took

        # A 4xx answered past the gate too: a legacy GET without a session id is a 400
        # of the sessions (issue 32's review).
        get = {"Accept": "text/event-stream", "Authorization": f"Bearer {other}"}
        took, answers, _ = _arrivals(lambda: httpx.get(server.url, headers=get), 4)
        assert [a.status_code for a in answers] == [400] * 4, [a.text for a in answers]
        assert took[-1] >= 1.4, took
    finally:
        stop(server.process)


def test_rate_limited_tool_calls_are_answered_at_the_pace(db_path: Path, tmp_path: Path) -> None:
    """A caller past its tool limit (1 a minute) calling 5 times at once: one call is
    answered (the ticket is unknown: an isError of its own) and the four refused (an
    isError saying when to retry) arrive over at least 0.6 s, their turns 0.2 s apart."""
    token = add_caller(db_path, "eager", tool_rate_limit="1/minute")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_REFUSALS_PER_SECOND="5")
    try:
        params = {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-1"}}
        took, answers, _ = _arrivals(lambda: modern_call(httpx, server.url, token, 1, params), 5)
        texts = [a.json()["result"]["content"][0]["text"] for a in answers]
        refused = [t for t in texts if t.startswith("Rate limit reached")]
        assert len(refused) == 4, texts
        assert all("retry in" in t for t in refused)
        assert took[-1] >= 0.6, took
    finally:
        stop(server.process)


def test_a_refusal_whose_client_left_while_it_waited_stays_refused(
    db_path: Path, tmp_path: Path
) -> None:
    """Turns 2.5 s apart: a caller past its tool limit whose client gives up (after
    0.3 s) while its refusal waits its turn is audited `rate_limited`, as answered, not
    `cancelled`."""
    token = add_caller(db_path, "leaving", tool_rate_limit="1/minute")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_REFUSALS_PER_SECOND="0.4")
    try:
        params = {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-1"}}
        for _ in range(2):  # the one call of the minute, then a refusal answered at once
            modern_call(httpx, server.url, token, 1, params)
        impatient = SimpleNamespace(post=lambda *a, **k: httpx.post(*a, **{**k, "timeout": 0.3}))
        try:
            modern_call(impatient, server.url, token, 2, params)
        except httpx.TimeoutException:
            pass
        else:
            raise AssertionError("the third call was answered before its turn")
        deadline = time.monotonic() + 10
        while len(audit_records(server.logs())) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop(server.process)
    outcomes = [r["outcome"] for r in audit_records(server.logs())]
    assert outcomes == ["tool_error", "rate_limited", "rate_limited"], outcomes


def test_serving_http_shortens_the_thread_switch_interval(monkeypatch, db_path: Path) -> None:
    """`serve` lets the event loop have the GIL after 1 ms of a worker thread's Python,
    not CPython's 5 ms (`create_app`, each of `--workers N`, makes the same call): the
    figure is in bench/fairness.py. Nothing is served here: uvicorn's run is replaced by
    one that closes the socket `serve` bound (port 0: any free one)."""
    import sys

    from ticket_server import compat
    from ticket_server.settings import Settings
    from ticket_server.transports import http

    switched: list[float] = []
    monkeypatch.setattr(sys, "setswitchinterval", switched.append)

    def run(sockets: list) -> None:
        for sock in sockets:
            sock.close()

    monkeypatch.setattr(compat, "graceful_uvicorn_server", lambda _: SimpleNamespace(run=run))
    http.serve(lambda *_: None, Settings(database_url=f"sqlite+aiosqlite:///{db_path}", port=0))
    assert switched == [http.SWITCH_INTERVAL] and http.SWITCH_INTERVAL < 0.005
