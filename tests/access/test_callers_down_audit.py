"""C46: with the callers table down, requests with a valid token get 503 with
`Retry-After`, and the audit never records them as requests "without a valid bearer
token": the ones recorded one by one say the table was unavailable, and the record that
counts the rest of the minute says they were refused because their tokens could not be
checked. A real HTTP server on SQLite; the table is renamed away meanwhile."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx2 as httpx

from tests.transports.conftest import add_caller, audit_records, start_http_server, stop
from ticket_server.access.audit import UNAUTHENTICATED_ROWS_PER_MINUTE, UNAUTHENTICATED_SUMMARY

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def test_c46_requests_with_valid_tokens_are_not_audited_as_tokenless(
    db_path: Path, tmp_path: Path
) -> None:
    """C46: 70 requests with a valid token while the callers table is away: each 503
    with Retry-After; 60 audit records say `callers table unavailable`, and the summary
    written at stop counts the other 10 as refused with 503 for want of a check, not as
    requests without a valid bearer token; a tokenless request is still counted so."""
    token = add_caller(db_path, "billing-bot")
    server = start_http_server(db_path, tmp_path, TICKET_SERVER_HTTP_RATE_LIMIT="1000/minute")
    sent = UNAUTHENTICATED_ROWS_PER_MINUTE + 10
    try:
        with sqlite3.connect(db_path) as conn:
            conn.execute("ALTER TABLE callers RENAME TO callers_away")
        try:
            with httpx.Client(timeout=10) as http:
                answers = [
                    http.post(
                        server.url,
                        json=PING,
                        headers={**HEADERS, "Authorization": f"Bearer {token}"},
                    )
                    for _ in range(sent)
                ]
                tokenless = http.post(server.url, json=PING, headers=HEADERS)
        finally:
            with sqlite3.connect(db_path) as conn:
                conn.execute("ALTER TABLE callers_away RENAME TO callers")
        assert [a.status_code for a in answers] == [503] * sent
        assert all(a.headers["retry-after"] == "5" for a in answers)
        assert tokenless.status_code == 401
    finally:
        stop(server.process)  # SIGTERM: the minute's summary is written at stop
    records = audit_records(server.logs())
    single = [r for r in records if r["tool"] != UNAUTHENTICATED_SUMMARY]
    summaries = [r for r in records if r["tool"] == UNAUTHENTICATED_SUMMARY]
    assert len(single) == UNAUTHENTICATED_ROWS_PER_MINUTE
    assert all(r["detail"] == "callers table unavailable" for r in single), single[:3]
    assert len(summaries) == 2, summaries
    checked, tokenless_summary = sorted(summaries, key=lambda r: r["outcome"], reverse=True)
    assert checked["outcome"] == "tool_error"
    assert checked["detail"].startswith("10 more requests refused with 503")
    assert "could not be checked" in checked["detail"]
    assert "without a valid bearer token" not in checked["detail"]
    assert tokenless_summary["outcome"] == "denied"
    assert tokenless_summary["detail"].startswith("1 more requests without a valid bearer token")
    assert token not in server.logs()
