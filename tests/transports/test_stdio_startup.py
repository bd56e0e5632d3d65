"""The stdio start-up checks against a database another process is writing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio


def test_c25_write_lock_at_start_is_waited_out(db_path: Path) -> None:
    """C25: another process holds a write lock on the SQLite file for 1 s while `serve`
    starts (an exclusive transaction: readers are refused meanwhile); the server waits
    within its database timeout and answers initialize and tools/list, instead of
    exiting with "cannot open the database". The file is in rollback-journal mode, as
    another tool may leave it (only there does a write lock refuse readers); the server
    puts it in WAL mode once the lock is released."""
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    # The lock really refuses readers: a reader without a busy timeout gets "locked".
    probe = sqlite3.connect(db_path, timeout=0)
    try:
        probe.execute("SELECT count(*) FROM tickets").fetchone()
        raise AssertionError("the exclusive lock did not refuse a reader")
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc)
    finally:
        probe.close()
    raw = RawStdio(db_path, TICKET_SERVER_DATABASE_TIMEOUT="5")
    try:
        raw.send(INIT)  # answered while the checks wait for the lock
        assert raw.read_until_id(1)["result"]["serverInfo"]["name"] == "ticket-server"
        raw.send(INITIALIZED)
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        try:  # held for 1 s more: tools/list waits for the checks, the process waits too
            raise AssertionError(f"answered under the lock: {raw.read(timeout=1.0)}")
        except AssertionError as exc:
            assert "no answer within" in str(exc), exc
        assert raw.process.poll() is None, raw.stderr()
        holder.execute("COMMIT")
        holder.close()
        tools = raw.read_until_id(2)
        assert {t["name"] for t in tools["result"]["tools"]} >= {
            "get_ticket_status_v2",
            "search_tickets_v2",
        }
        assert raw.process.poll() is None
        assert "cannot open the database" not in raw.stderr()
    finally:
        raw.close()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def test_c25_in_wal_mode_a_write_lock_does_not_hold_up_start(db_path: Path) -> None:
    """C25 on a file in WAL mode (the server's own): another process's open write
    transaction does not stop the start-up checks or the first calls."""
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    conn.close()
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE tickets SET subject = subject WHERE id = 'SUP-4412'")
    raw = RawStdio(db_path, TICKET_SERVER_DATABASE_TIMEOUT="5")
    try:
        raw.send(INIT)
        assert raw.read_until_id(1)["result"]["serverInfo"]["name"] == "ticket-server"
        raw.send(INITIALIZED)
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-4412"}},
            }
        )
        answer = raw.read_until_id(2)  # while the write transaction is still open
        assert answer["result"]["isError"] is False, answer
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        raw.close()
