"""Issue 16, item 11, for requests without a valid token: a 401 (or a 429 to an address
past its limit) is refused before the body is read, so a legacy-revision request cannot
be known to be a tools/call. Every such refusal on /mcp is audited as what its headers
say it is, as a sample: up to ``UNAUTHENTICATED_ROWS_PER_MINUTE`` records a minute, then
one record counting the rest; the ``ticket_server_unauthenticated_requests`` metric counts
every one. A flood of them therefore cannot fill the audit table, and an authenticated
call's record is written as always. On a real HTTP server, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import re

import httpx2 as httpx

from tests.access.conftest import MODERN_META, audit_rows
from tests.transports.conftest import add_caller, start_http_server, stop
from ticket_server.access.audit import UNAUTHENTICATED_ROWS_PER_MINUTE, UNAUTHENTICATED_SUMMARY
from ticket_server.settings import Settings
from ticket_server.transports.refusals import UNREAD

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LEGACY_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "search_tickets_v2", "arguments": {"query": "x"}},
}
MODERN = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28"}


def test_unauthenticated_refusals_are_audited_as_a_sample_and_counted(
    database_url: str, tmp_path
) -> None:
    token = add_caller(database_url, "steady")
    # The refusals answered at once: this is about their audit, not their pace.
    server = start_http_server(database_url, tmp_path, TICKET_SERVER_REFUSALS_PER_SECOND="0")
    extra = 15
    try:
        with httpx.Client(timeout=10) as http:
            sent = [
                # A legacy tools/call without a token, and one with a token nobody holds.
                http.post(server.url, json=LEGACY_CALL, headers=ACCEPT),
                http.post(
                    server.url, json=LEGACY_CALL, headers={**ACCEPT, "Authorization": "Bearer nope"}
                ),
                # 2026-07-28: the routing headers say what it is; a header value of any length.
                http.post(
                    server.url,
                    json={**LEGACY_CALL, "params": {**LEGACY_CALL["params"], "_meta": MODERN_META}},
                    headers={**MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "search_tickets_v2"},
                ),
                http.post(
                    server.url,
                    json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                    headers={
                        **MODERN,
                        "Mcp-Method": "tools/list",
                        "MCP-Protocol-Version": "9" * 100,
                    },
                ),
            ]
            sent += [
                http.post(server.url, json=LEGACY_CALL, headers=ACCEPT)
                for _ in range(UNAUTHENTICATED_ROWS_PER_MINUTE + extra - len(sent))
            ]
            assert {answer.status_code for answer in sent} == {401}
            steady = http.post(
                server.url,
                json={**LEGACY_CALL, "params": {**LEGACY_CALL["params"], "_meta": MODERN_META}},
                headers={
                    **MODERN,
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": "search_tickets_v2",
                    "Authorization": f"Bearer {token}",
                },
            )
            assert steady.status_code == 200
            metrics = http.get(f"{server.base}/metrics").text
    finally:
        stop(server.process)  # SIGTERM: the minute's summary is written with the queue
    counted = re.search(
        r'^ticket_server_unauthenticated_requests_total\{status="401"\} (\S+)$', metrics, re.M
    )
    assert (
        counted is not None and float(counted.group(1)) == UNAUTHENTICATED_ROWS_PER_MINUTE + extra
    )

    rows = asyncio.run(audit_rows(Settings(database_url=database_url)))
    anonymous = [r for r in rows if r.caller is None]
    assert len(anonymous) == UNAUTHENTICATED_ROWS_PER_MINUTE + 1
    assert [(r.tool, r.outcome, r.detail) for r in anonymous[:4]] == [
        (UNREAD, "denied", "no valid bearer token"),
        (UNREAD, "denied", "no valid bearer token"),
        ("search_tickets_v2", "denied", "no valid bearer token"),
        ("(tools/list)", "denied", "no valid bearer token"),
    ]
    assert anonymous[3].protocol_version == "9" * 29 + "..."  # as sent, cut to its column
    summary = [r for r in anonymous if r.tool == UNAUTHENTICATED_SUMMARY]
    assert len(summary) == 1 and summary[0].outcome == "denied"
    assert summary[0].detail.startswith(
        f"{extra} more requests without a valid bearer token refused within "
    )
    assert [(r.caller, r.tool, r.outcome) for r in rows if r.caller is not None] == [
        ("steady", "search_tickets_v2", "ok")
    ]


def test_an_unauthenticated_address_past_its_limit_is_sampled_too(db_path, tmp_path) -> None:
    """Past the per-address HTTP limit the answer is 429; the refusal is counted under
    that status and recorded as rate limited, within the same sample."""
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_HTTP_RATE_LIMIT="2/minute")
    try:
        with httpx.Client(timeout=10) as http:
            statuses = [
                http.post(server.url, json=LEGACY_CALL, headers=ACCEPT).status_code
                for _ in range(4)
            ]
            metrics = http.get(f"{server.base}/metrics").text
    finally:
        stop(server.process)
    assert statuses == [401, 401, 429, 429]
    assert 'ticket_server_unauthenticated_requests_total{status="429"} 2.0' in metrics
    rows = asyncio.run(audit_rows(Settings(database_url=f"sqlite+aiosqlite:///{db_path}")))
    assert [(r.tool, r.outcome, r.detail) for r in rows] == [
        (UNREAD, "denied", "no valid bearer token"),
        (UNREAD, "denied", "no valid bearer token"),
        (UNREAD, "rate_limited", "HTTP request limit reached"),
        (UNREAD, "rate_limited", "HTTP request limit reached"),
    ]


async def test_each_window_ends_with_its_count_while_the_writer_runs(settings: Settings) -> None:
    """The record counting a window's unrecorded refusals is written once the window has
    passed (within the writer's flush interval), without waiting for a stop; the next
    window records one by one again. The window is shortened here, as a test may."""
    from ticket_server.access.audit import AuditWriter
    from ticket_server.access.callers import open_store
    from ticket_server.access.context import CallRecord, Cause, Outcome

    def refused(n: int) -> CallRecord:
        record = CallRecord(tool=UNREAD, transport="http", trace_id=f"{n:032d}")
        record.fail(Outcome.DENIED, Cause.UNAUTHENTICATED)
        return record

    store = open_store(settings)
    writer = AuditWriter(store, flush_seconds=0.05)
    writer.SAMPLE_SECONDS = 0.5
    await writer.start()
    try:
        for n in range(UNAUTHENTICATED_ROWS_PER_MINUTE + 3):
            writer.observe_unauthenticated(refused(n))
        deadline = asyncio.get_running_loop().time() + 30
        while not any(r.tool == UNAUTHENTICATED_SUMMARY for r in await audit_rows(settings)):
            assert asyncio.get_running_loop().time() < deadline, "no summary record within 30 s"
            await asyncio.sleep(0.05)
        writer.observe_unauthenticated(refused(1000))  # a new window: recorded
    finally:
        await writer.stop()
        await store.aclose()
    rows = await audit_rows(settings)
    assert [r.trace_id for r in rows[:UNAUTHENTICATED_ROWS_PER_MINUTE]] == [
        f"{n:032d}" for n in range(UNAUTHENTICATED_ROWS_PER_MINUTE)
    ]
    assert rows[UNAUTHENTICATED_ROWS_PER_MINUTE].tool == UNAUTHENTICATED_SUMMARY
    assert rows[UNAUTHENTICATED_ROWS_PER_MINUTE].detail.startswith(
        "3 more requests without a valid bearer token"
    )
    assert rows[-1].trace_id == f"{1000:032d}" and len(rows) == UNAUTHENTICATED_ROWS_PER_MINUTE + 2
