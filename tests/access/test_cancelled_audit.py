"""C47: a tools/call the client cancels while it runs is recorded as `cancelled`, on
both engines (the `audit_events.outcome` constraint takes the value since revision
0011): over raw stdio, a search waiting on a locked database is cancelled with
`notifications/cancelled` (tests/hardening/test_cancellation.py's scenario)."""

from __future__ import annotations

import json

from tests.hardening.test_cancellation import _cancel_a_waiting_call
from tests.helpers import column
from tests.transports.conftest import WAITING, audit_records, stop
from tests.transports.test_stdio import RawStdio


def test_c47_a_cancelled_call_is_audited_as_cancelled(database_url: str) -> None:
    """C47: call 10 (search_tickets_v2, waiting on the lock) is cancelled: no response
    carries its id; its audit record (stderr line and row) says `cancelled`, with no
    result bytes, never `ok`; the calls answered around it say `ok`."""
    raw = RawStdio(database_url, **WAITING)
    try:
        _cancel_a_waiting_call(raw, database_url)
        raw.close()  # end of input: the audit rows are written before the exit
        assert raw.process.returncode == 0, raw.stderr()
    finally:
        stop(raw.process)
    assert 10 not in [json.loads(line).get("id") for line in raw.lines]
    searches = [r for r in audit_records(raw.stderr()) if r["tool"] == "search_tickets_v2"]
    assert [r["outcome"] for r in searches] == ["cancelled", "ok"], searches
    assert searches[0]["result_bytes"] == 0
    rows = column(
        database_url,
        "SELECT outcome FROM audit_events WHERE tool = 'search_tickets_v2' ORDER BY pk",
    )
    assert rows == ["cancelled", "ok"], rows
