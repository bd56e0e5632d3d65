"""`callers add` refuses grants that cannot work, one line each; `callers list` shows
write queues and confirmation lists; `audit` prints stored text with control characters
escaped; TICKET_SERVER_CONFIRM_WRITES takes a plain list. Through the real command, on
SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from tests.test_operator_cli import one_line, run
from ticket_server.admin.commands import printable

W, R = "tickets:write", "tickets:read"


@pytest.mark.one_engine  # the grants are checked before the database is written
@pytest.mark.parametrize(
    "args, says",
    [
        (["--scope", W], "tickets:write needs tickets:read"),
        (["--scope", R, "--write-queue", "billing"], "--write-queue needs --scope tickets:write"),
        (["--scope", R, "--confirm", "reply_to_customer"], "--confirm needs --scope tickets:write"),
        (
            ["--scope", R, "--scope", W, "--confirm", "none", "--confirm", "reply_to_customer"],
            "--confirm none means no confirmation",
        ),
        (
            ["--scope", R, "--scope", W, "--queue", "billing", "--write-queue", "support"],
            "--write-queue support is not among its --queue queues",
        ),
        (["--scope", R, "--queue", "no-such-queue"], "--queue 'no-such-queue': no such queue"),
        # A review's finding: a limit of 0 was stored (the caller could call nothing) and
        # of '1/second;10/minute' only the first was ever applied.
        (["--scope", R, "--tool-limit", "0/minute"], "at least 1"),
        (["--scope", R, "--http-limit", "1/second;10/minute"], "one limit"),
    ],
)
def test_callers_add_refuses_contradictory_grants(
    database_url: str, args: list[str], says: str
) -> None:
    line = one_line(run(database_url, "callers", "add", "bot", *args))
    assert says in line, line
    listed = run(database_url, "callers", "list", "--json")
    assert "bot" not in listed.stdout


def test_callers_add_folds_queue_names_and_list_shows_write_grants(database_url: str) -> None:
    added = run(
        database_url,
        "callers",
        "add",
        "agent",
        "--scope",
        R,
        "--scope",
        W,
        "--queue",
        "Billing",
        "--queue",
        " support ",
        "--write-queue",
        "BILLING",
        "--confirm",
        "set_ticket_status",
    )
    assert added.returncode == 0, added.stderr
    (row,) = [
        json.loads(line)
        for line in run(database_url, "callers", "list", "--json").stdout.splitlines()
    ]
    assert row["queues"] == ["billing", "support"]
    assert row["write_queues"] == ["billing"]
    assert row["confirm_writes"] == ["set_ticket_status"]
    table = run(database_url, "callers", "list").stdout.splitlines()
    assert "WRITE QUEUES" in table[0] and "CONFIRM" in table[0]
    assert "billing,support" in table[1] and "set_ticket_status" in table[1]


def test_confirm_writes_setting_takes_a_plain_list(database_url: str) -> None:
    ok = run(database_url, "callers", "list", TICKET_SERVER_CONFIRM_WRITES="reply_to_customer")
    assert ok.returncode == 0, ok.stderr
    line = one_line(run(database_url, "callers", "list", TICKET_SERVER_CONFIRM_WRITES="reply"))
    assert "TICKET_SERVER_CONFIRM_WRITES" in line and "comma-separated" in line, line


def _store_audit_row(database_url: str, **values: object) -> None:
    """One audit row written straight to the table (what a client sent, stored as sent)."""
    import asyncio
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from ticket_server.access.callers import open_store
    from ticket_server.access.models import AuditEvent
    from ticket_server.settings import Settings

    row = {
        "time": datetime.now(UTC),
        "trace_id": "t" * 32,
        "transport": "http",
        "arguments": "{}",
        "result_bytes": 1,
        "duration_ms": 1.0,
        **values,
    }

    async def store_row() -> None:
        store = open_store(Settings(database_url=database_url))
        try:
            async with store.session() as session, session.begin():
                await session.execute(insert(AuditEvent.__table__).values(**row))
        finally:
            await store.aclose()

    asyncio.run(store_row())


def test_audit_prints_control_characters_escaped() -> None:
    """Stored text printed by `ticket-server audit` cannot drive the operator's terminal:
    escapes, NUL, bidirectional marks and line breaks are shown escaped."""
    assert (
        printable("ana\x1b[31m\x00\u202eevil\u200f\nü")
        == "ana\\x1b[31m\\x00\\u202eevil\\u200f\\x0aü"
    )


def test_audit_command_escapes_a_stored_caller_name(database_url: str) -> None:
    """An audit row holding an ANSI escape (a tool name sent by a client is stored as
    sent) is printed escaped by `ticket-server audit`."""
    _store_audit_row(
        database_url,
        caller="x",
        tool="evil\x1b]0;owned\x07\u202e",
        outcome="tool_error",
        detail="unknown tool",
    )
    out = run(database_url, "audit").stdout
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "evil\\x1b]0;owned\\x07\\u202e" in out


@pytest.mark.one_engine  # the filters are checked, and folded, before the query
def test_audit_filters_are_folded_and_never_silently_ignored(database_url: str) -> None:
    """`audit` (a review's finding): `--caller BILLING` found none of billing's rows,
    though every caller name is stored lower-cased and `callers revoke BILLING` finds
    it; `--ticket` printed the ticket's whole story whatever `--caller`, `--tool` or
    `--since` (or `--limit`) said beside it; and `--limit 0` printed no row while `--limit -1` printed
    every row; an empty `--caller` or `--tool` printed every row. A name is folded now,
    and the others are one line each."""
    _store_audit_row(database_url, caller="billing", tool="get_ticket", outcome="ok")
    folded = run(database_url, "audit", "--caller", " BILLING ", "--json")
    assert folded.returncode == 0, folded.stderr
    assert [json.loads(line)["caller"] for line in folded.stdout.splitlines()] == ["billing"]
    for extra in (
        ["--caller", "billing"],
        ["--tool", "get_ticket"],
        ["--since", "1h"],
        ["--limit", "5"],
    ):
        line = one_line(run(database_url, "audit", "--ticket", "SUP-4412", *extra))
        assert "--ticket" in line and extra[0] in line, line
    for limit in ("0", "-1"):
        assert "--limit" in one_line(run(database_url, "audit", "--limit", limit))
    # An empty name (`--caller "$NAME"` with NAME unset) printed every caller's rows.
    for flag in ("--caller", "--tool"):
        assert flag in one_line(run(database_url, "audit", flag, " "))


@pytest.mark.one_engine  # --help reads no database
def test_callers_add_help_names_every_toolset(database_url: str) -> None:
    """`callers add --help` said a toolset is "read, respond or triage" (a review's
    finding): the opt-in ones, which a caller's own list exists to grant, were missing."""
    from typing import get_args

    from ticket_server.settings import ToolsetName

    shown = " ".join(run(database_url, "callers", "add", "--help").stdout.split())
    for toolset in get_args(ToolsetName):
        assert (
            toolset in shown.split("--toolset TOOLSET a toolset", 1)[1].split("--kind {", 1)[0]
        ), toolset
