"""Issue 16, item 2: an arguments object no tool takes (unknown keys, too many values,
too much text) is refused at a bounded cost in the pipeline's arguments stage, before
validation and before the audit serialises anything, so one request cannot stall the
event loop for every other caller."""

from __future__ import annotations

import asyncio
import time

from fastmcp import Client

from tests.access.conftest import audit_rows
from tests.helpers import text_of
from ticket_server.tools.errors import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_VALUES

HUGE_KEYS = 300_000


async def _ticker(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def test_300000_unknown_keys_are_refused_without_stalling_other_calls(
    server, settings, mode: str
) -> None:
    arguments = {str(i): 0 for i in range(HUGE_KEYS)}
    async with Client(server, mode=mode) as client:
        gaps: list[float] = []
        stop = asyncio.Event()
        ticker = asyncio.create_task(_ticker(gaps, stop))

        async def other() -> float:
            started = time.perf_counter()
            assert (await client.call_tool("search_tickets_v2", {"limit": 1})).is_error is False
            return time.perf_counter() - started

        started = time.perf_counter()
        huge, other_seconds = await asyncio.gather(
            client.call_tool("get_ticket_status_v2", arguments, raise_on_error=False),
            other(),
        )
        elapsed = time.perf_counter() - started
        stop.set()
        await ticker
    assert huge.is_error
    text = text_of(huge)
    assert "is not an argument of this tool" in text or "are not an argument of this tool" in text
    assert "ticket_id" in text and len(text) < 600
    print(
        f"\n[{mode}] {HUGE_KEYS} keys: call answered in {elapsed * 1000:.0f} ms (client side included); "
        f"worst event-loop gap {max(gaps) * 1000:.1f} ms; another caller's call {other_seconds * 1000:.0f} ms"
    )
    rows = await audit_rows(settings)
    assert len(rows) == 2
    refused = next(r for r in rows if r.tool == "get_ticket_status_v2")
    assert refused.outcome == "tool_error" and refused.detail == "invalid arguments"
    assert refused.arguments == f'{{"[not recorded]": "{HUGE_KEYS} arguments"}}'


async def test_too_many_values_or_too_much_text_is_refused_before_validation(client) -> None:
    many = await client.call_tool(
        "search_tickets_v2", {"status": ["open"] * (MAX_ARGUMENT_VALUES + 5)}, raise_on_error=False
    )
    assert many.is_error and f"more than {MAX_ARGUMENT_VALUES} values" in text_of(many)
    long = await client.call_tool(
        "search_tickets_v2", {"query": "x" * (MAX_ARGUMENT_CHARS + 1)}, raise_on_error=False
    )
    assert long.is_error and f"more than {MAX_ARGUMENT_CHARS} characters" in text_of(long)
    unknown = await client.call_tool(
        "get_ticket_status_v2", {"ticket_id": "SUP-1", "id": "x"}, raise_on_error=False
    )
    assert unknown.is_error
    assert text_of(unknown) == (
        "Invalid arguments for get_ticket_status_v2: 'id' is not an argument of this tool "
        "(arguments: ticket_id). Nothing was done."
    )


def test_300000_keys_over_http_are_refused_before_parsing_and_healthz_is_answered(
    db_path, tmp_path
) -> None:
    """The same call to a real HTTP server whose body limit admits it (4 MiB; 2026-07-28,
    one POST, the body prepared beforehand): the gate counts its JSON tokens without
    parsing it and answers 413 (a JSON-RPC -32600 error), so neither the gate nor the MCP
    SDK parses 300,000 keys on the event loop. /healthz, polled from another thread
    meanwhile, is answered every time; its worst latency is printed beside the quiet
    figure (bench/stall.py measures more bodies). The refusal is audited, and a call at
    the arguments' bounds is still taken."""
    import json
    import threading

    import httpx2 as httpx

    from tests.transports.conftest import add_caller, start_http_server, stop
    from ticket_server.transports.frames import MAX_MESSAGE_TOKENS

    token = add_caller(db_path, "flooder")
    server = start_http_server(
        db_path, tmp_path, TICKET_SERVER_MAX_REQUEST_BYTES=str(4 * 1024 * 1024)
    )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def call(request_id: int, arguments: dict) -> bytes:
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": "get_ticket_status_v2", "arguments": arguments, "_meta": meta},
            }
        ).encode()

    body = call(7, {str(i): 0 for i in range(HUGE_KEYS)})
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "get_ticket_status_v2",
    }
    statuses: list[int] = []
    try:

        def healthz_latencies(
            until: threading.Event, out: list[float], polling: threading.Event | None = None
        ) -> None:
            with httpx.Client(timeout=30) as http:
                while not until.is_set():
                    started = time.perf_counter()
                    statuses.append(http.get(f"{server.base}/healthz").status_code)
                    out.append(time.perf_counter() - started)
                    if polling is not None:
                        polling.set()

        assert (
            httpx.post(
                server.url, content=call(6, {"ticket_id": "SUP-4412"}), headers=headers, timeout=60
            ).status_code
            == 200
        )
        quiet: list[float] = []
        done = threading.Event()
        threading.Timer(0.5, done.set).start()
        healthz_latencies(done, quiet)
        busy: list[float] = []
        done = threading.Event()
        # The body is sent once /healthz is being polled: a 413 can come back before a
        # poller that is still starting has asked anything.
        polling = threading.Event()
        poller = threading.Thread(target=healthz_latencies, args=(done, busy, polling))
        poller.start()
        assert polling.wait(30)
        started = time.perf_counter()
        response = httpx.post(server.url, content=body, headers=headers, timeout=60)
        answered = time.perf_counter() - started
        done.set()
        poller.join()
        print(
            f"\n{len(body) / 1e6:.1f} MB, {HUGE_KEYS} keys over HTTP: {response.status_code} in "
            f"{answered * 1000:.0f} ms; /healthz worst {max(busy) * 1000:.1f} ms while served "
            f"(quiet: worst {max(quiet) * 1000:.1f} ms)"
        )
        assert response.status_code == 413, response.text[:300]
        error = response.json()["error"]
        assert (
            error["code"] == -32600
            and f"more than {MAX_MESSAGE_TOKENS} JSON tokens" in error["message"]
        )
        assert busy and set(statuses) == {200}
        # At the arguments' bounds (MAX_ARGUMENT_VALUES list items): within the token
        # limit, so the pipeline answers it, in words a model can act on.
        bounded = httpx.post(
            server.url,
            content=call(8, {"ticket_id": ["SUP-1"] * MAX_ARGUMENT_VALUES}),
            headers=headers,
            timeout=60,
        )
        assert bounded.status_code == 200 and '"isError":true' in bounded.text.replace(" ", "")
    finally:
        stop(server.process)
    from tests.transports.conftest import audit_records

    refused = [
        r for r in audit_records(server.logs()) if r["caller"] == "flooder" and r["outcome"] != "ok"
    ]
    assert [(r["tool"], r["outcome"]) for r in refused] == [
        ("get_ticket_status_v2", "tool_error")
    ] * 2
    assert refused[0]["detail"].startswith(f"more than {MAX_MESSAGE_TOKENS} JSON tokens")
    assert refused[1]["detail"] == "invalid arguments"


async def test_a_bad_item_of_a_list_is_one_sentence(client) -> None:
    """An enum list with a value outside it is one sentence naming the allowed values and
    the bad item (it was said twice, once per branch of the optional argument's union)."""
    result = await client.call_tool(
        "search_tickets_v2", {"query": "x", "status": ["opened"]}, raise_on_error=False
    )
    text = text_of(result)
    assert result.is_error and text.count("'status' must be") == 1, text
    assert "one of 'new', 'open'" in text and "(got 'opened')" in text


async def test_a_list_of_the_wrong_length_is_told_its_bounds(client) -> None:
    """A list with too few or too many items names how many it may hold: a review found
    "'status' must be a list of one of 'new', 'open', ... (got [])", which the model had
    sent, and eleven tags answered as "must be a list of a string"."""
    sent = [
        ({"query": "x", "status": []}, "'status' must be a list of 1 to 6 items, each one of"),
        (
            {"query": "x", "tags": [f"t{i}" for i in range(11)]},
            "'tags' must be a list of 1 to 10 items, each a string of at most 64 characters",
        ),
    ]
    for arguments, said in sent:
        result = await client.call_tool("search_tickets_v2", arguments, raise_on_error=False)
        assert result.is_error and said in text_of(result), text_of(result)
    result = await client.call_tool(
        "count_tickets", {"group_by": ["queue"] * 6}, raise_on_error=False
    )
    assert "'group_by' must be a list of at most 5 items, each one of" in text_of(result)
