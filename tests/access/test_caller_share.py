"""Fair shares (issue 32, deliverable 2): at most `TICKET_SERVER_CALLER_SHARE` of one
caller's expensive calls (searches, full reads, writes) do their work at once; the rest
wait their turn, within the call deadline, instead of being refused; cheap calls never
wait for them. Over raw stdio on PostgreSQL, where a query waiting on a locked table is
seen in pg_stat_activity: so the test counts the calls doing their work, not guessing."""

from __future__ import annotations

import time

import pytest

from tests.postgres import lock_waiters, wait_for_lock_waiters
from tests.transports.conftest import WAITING, database_locked, stop
from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio


def _call(request_id: int, name: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@pytest.mark.postgresql_only
def test_a_callers_expensive_calls_take_turns(database_url: str) -> None:
    """Share 2: of three searches sent while the tickets table is locked, two wait on
    the lock and the third waits its turn (a second later, still two waiters); a status
    lookup sent meanwhile reaches the database at once (three waiters); when the lock
    goes all four are answered with results."""
    raw = RawStdio(database_url, **WAITING, TICKET_SERVER_CALLER_SHARE="2")
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        raw.send(_call(2, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}))  # warm
        assert raw.read_until_id(2)["result"]["isError"] is False
        with database_locked(database_url):
            for n, query in ((10, "invoice"), (11, "refund"), (12, "password")):
                raw.send(_call(n, "search_tickets_v2", {"query": query}))
            wait_for_lock_waiters(database_url, 2)
            time.sleep(1)
            assert lock_waiters(database_url) == 2, "the third search waits its turn"
            raw.send(_call(13, "get_ticket_status_v2", {"ticket_id": "SUP-4412"}))
            wait_for_lock_waiters(database_url, 3)
        answers = {m["id"]: m for m in (raw.read(timeout=60) for _ in range(4))}
        assert set(answers) == {10, 11, 12, 13}
        assert all(a["result"]["isError"] is False for a in answers.values()), answers
        raw.close()
    finally:
        stop(raw.process)
