"""`ticket-server sla load | show` and `report sla`, as an operator runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_operator_cli import one_line, run
from ticket_server.settings import Settings

POLICY = """\
[queues.billing]
time_zone = "Europe/Berlin"
hours = { mon = ["09:00-17:00"], tue = ["09:00-17:00"], wed = ["09:00-17:00"], thu = ["09:00-17:00"], fri = ["09:00-17:00"] }
holidays = ["2026-12-25"]
holiday_calendar = "DE-BE"
targets.high = { first_response = 60, resolution = 480 }
targets.normal = { first_response = 240, resolution = 2400 }

[queues."*"]
targets.urgent = { first_response = 60 }
"""


@pytest.mark.sqlite_only
def test_load_show_refuse_and_report(settings: Settings, tmp_path: Path) -> None:
    url = settings.database_url
    policy = tmp_path / "sla.toml"
    policy.write_text(POLICY)
    loaded = run(url, "sla", "load", str(policy))
    assert loaded.returncode == 0, loaded.stderr
    assert "2 queue calendars, 3 targets" in loaded.stderr
    shown = json.loads(run(url, "sla", "show").stdout)
    assert shown["queues"]["billing"]["holidays"] == ["2026-12-25"]
    assert shown["queues"]["billing"]["holiday_calendar"] == "DE-BE"
    assert shown["queues"]["billing"]["targets"]["high"] == {
        "first_response": 60,
        "resolution": 480,
    }

    (tmp_path / "bad.toml").write_text('[queues.billing]\ntime_zone = "Mars/Base"\n')
    assert "queue billing" in one_line(run(url, "sla", "load", str(tmp_path / "bad.toml")))
    assert json.loads(run(url, "sla", "show").stdout) == shown  # nothing changed
    (tmp_path / "bad.toml").write_text('[queues.billing]\nholiday_calendar = "Atlantis"\n')
    assert "holiday calendar 'Atlantis'" in one_line(
        run(url, "sla", "load", str(tmp_path / "bad.toml"))
    )
    assert json.loads(run(url, "sla", "show").stdout) == shown

    report = run(url, "report", "sla", "--queue", "billing", "--since", "100000d", "--json")
    assert report.returncode == 0, report.stderr
    lines = json.loads(report.stdout)["priorities"]
    assert [line["priority"] for line in lines] == ["urgent", "high", "normal", "low"]
    for line in lines:
        covered = line["tickets"] - line["without_sla"]
        for clock in ("first_response", "resolution"):
            parts = ("met", "breached", "pending")
            assert sum(line[f"{clock}_{p}"] for p in parts) == covered, line
    # billing's own entry decides (no urgent or low target); `*` is for queues without one.
    assert [line["without_sla"] == line["tickets"] for line in lines] == [True, False, False, True]
    table = run(url, "report", "sla", "--queue", "billing", "--since", "100000d")
    assert table.returncode == 0 and "│ high" in table.stdout and "billing" in table.stdout
    assert "--since" in one_line(run(url, "report", "sla", "--since", "soon"))


@pytest.mark.sqlite_only
def test_recompute_derives_what_an_older_version_left_out(
    settings: Settings, tmp_path: Path
) -> None:
    """Tickets whose SLA columns are not derived (as a replica of an older version
    writes them): count_tickets says how many instead of counting; `sla recompute`
    derives them, and the counts are numbers again."""
    import asyncio
    from datetime import UTC, datetime

    from fastmcp import Client
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from ticket_server.server import build_server

    url = settings.database_url
    (tmp_path / "sla.toml").write_text(POLICY)
    assert run(url, "sla", "load", str(tmp_path / "sla.toml")).returncode == 0

    at = datetime.now(UTC)  # one time for every count: none may breach in between

    async def counted() -> dict:
        async with Client(build_server(settings, now=lambda: at)) as client:
            result = await client.call_tool("count_tickets", {"group_by": ["queue"]})
            return result.structured_content

    before = asyncio.run(counted())

    async def forget() -> None:
        engine = create_async_engine(url)
        async with engine.begin() as conn:
            await conn.execute(
                text("UPDATE tickets SET sla_covered = NULL, sla_due_at = NULL, sla_breach_at = NULL "
                     "WHERE id IN (SELECT id FROM tickets WHERE status = 'open' ORDER BY id LIMIT 7)")
            )  # fmt: skip
        await engine.dispose()

    asyncio.run(forget())
    unknown = asyncio.run(counted())
    assert unknown["sla_note"].startswith("7 of these tickets have no SLA state stored yet")
    assert all(g["breached"] is None for g in unknown["groups"])
    done = run(url, "sla", "recompute")
    assert done.returncode == 0 and "SLA state derived again for" in done.stderr, done.stderr
    assert asyncio.run(counted()) == before


def test_load_and_recompute_take_the_planners_statistics_again(
    settings: Settings, backend: str, tmp_path: Path
) -> None:
    """`sla load` and `sla recompute` rewrite every ticket's SLA columns; each then runs
    ANALYZE on the tickets (VACUUM (ANALYZE) on PostgreSQL), so the planner does not plan
    ``breached`` and ``due_before`` filters from the old distribution, nor the counts
    over a table of dead rows (bench/ANALYSIS.md, SLA at 1M on PostgreSQL); PostgreSQL
    also rebuilds ``ix_tickets_counts``, which the rewrite left three times its size."""
    import asyncio
    import time

    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    url = settings.database_url
    # SQLite keeps the statistics in sqlite_stat1; PostgreSQL counts the VACUUM and
    # ANALYZE runs by hand (not autovacuum's) in pg_stat_user_tables.
    probe = (
        "SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'tickets'"
        if backend == "sqlite"
        else "SELECT LEAST(analyze_count, vacuum_count) FROM pg_stat_user_tables "
        "WHERE relname = 'tickets'"
    )

    async def statistics(forget: bool = False) -> int:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                if forget and backend == "sqlite":
                    await conn.execute(text("ANALYZE"))  # sqlite_stat1 exists, then empty it
                    await conn.execute(text("DELETE FROM sqlite_stat1"))
                return int((await conn.execute(text(probe))).scalar_one() or 0)
        finally:
            await engine.dispose()

    async def counts_index_file() -> int:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                sql = "SELECT pg_relation_filenode('ix_tickets_counts')"
                return int((await conn.execute(text(sql))).scalar_one())
        finally:
            await engine.dispose()

    (tmp_path / "sla.toml").write_text(POLICY)
    for command in (("sla", "load", str(tmp_path / "sla.toml")), ("sla", "recompute")):
        before = asyncio.run(statistics(forget=True))
        index_file = asyncio.run(counts_index_file()) if backend == "postgresql" else 0
        done = run(url, *command)
        assert done.returncode == 0, done.stderr
        if backend == "postgresql":  # rebuilt: the rewrite left the index bloated
            assert asyncio.run(counts_index_file()) != index_file, command
        if backend == "postgresql":  # the counter reaches the statistics view soon after
            for _ in range(50):
                if asyncio.run(statistics()) > before:
                    break

                time.sleep(0.1)
        assert asyncio.run(statistics()) > before, command


@pytest.mark.sqlite_only
def test_report_sla_names_a_bad_since_or_queue(settings: Settings) -> None:
    """`report sla` (a review's finding): a duration past the calendar (`99999999d`)
    ended in a traceback and one written with a digit that is not 0-9 (`²d`) in
    Python's words; each is now one line naming --since. A queue is named in any case,
    as the tools take it (`--queue Billing`, the display name, reported no ticket), and
    one that does not exist is refused naming the queues, where it said "no tickets
    created in that time". The table's title gives a --since with an offset in UTC, as
    it says (it printed the local time)."""
    url = settings.database_url
    # An ISO time whose UTC falls outside years 1-9999 was "the ticket database did not
    # answer" (and an ERROR with a traceback in the log; `audit`: "run db upgrade").
    edges = ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00")
    for since in ("99999999d", "999999999999999999999d", "²d", *edges):
        assert "--since" in one_line(run(url, "report", "sla", "--since", since)), since

    def priorities(queue: str) -> list[dict]:
        report = run(url, "report", "sla", "--queue", queue, "--since", "100000d", "--json")
        assert report.returncode == 0, report.stderr
        document = json.loads(report.stdout)
        assert document["queue"] == "billing"
        return document["priorities"]

    billing = priorities("billing")
    assert billing and priorities("Billing") == billing == priorities(" BILLING ")
    refused = one_line(run(url, "report", "sla", "--queue", "biling", "--since", "100000d"))
    assert "'biling'" in refused and "billing, engineering" in refused, refused

    table = run(url, "report", "sla", "--since", "2026-01-01T00:00+05:00")
    assert table.returncode == 0, table.stderr
    assert "since 2025-12-31 19:00 UTC" in " ".join(table.stdout.split()), table.stdout


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        # A review's finding: `true` was a 1-minute target and "30" 30 minutes.
        ("p.toml", "[queues.billing]\ntargets.urgent = { first_response = true }\n", "integer"),
        (
            "p.json",
            '{"queues": {"billing": {"targets": {"urgent": {"first_response": "30"}}}}}',
            "integer",
        ),
        # A queue no ticket is in and `queues add` never made: its targets applied to none.
        ("p.toml", "[queues.biling]\ntargets.urgent = { first_response = 30 }\n", "'biling'"),
        # The time zone was refused in the words of Python's KeyError.
        ("p.toml", '[queues.billing]\ntime_zone = "europe/berlin"\n', "IANA name"),
        # Hours with no working interval loaded, and their clocks never ran (a review's).
        ("p.toml", "[queues.billing]\nhours = {}\n", "queue billing: hours"),
        ("p.toml", "[queues.billing]\nhours = { mon = [], fri = [] }\n", "queue billing: hours"),
        # A .yaml file was read as JSON and called "not valid yaml".
        ("p.yaml", "queues: {}\n", "not valid JSON (a file not named .toml is read as JSON)"),
        # Not UTF-8: Python's words without the file's name.
        ("p.toml", "# caf\udce9\n", "p.toml: not UTF-8 text"),
    ],
)
def test_sla_load_refuses_what_would_apply_otherwise(
    settings: Settings, tmp_path: Path, name: str, text: str, says: str
) -> None:
    url = settings.database_url
    policy = tmp_path / name
    policy.write_text(text, errors="surrogateescape")
    before = run(url, "sla", "show").stdout
    line = one_line(run(url, "sla", "load", str(policy)))
    assert says in line, line
    assert "No time zone found" not in line
    assert run(url, "sla", "show").stdout == before


@pytest.mark.sqlite_only
def test_sla_load_takes_a_holiday_calendar_in_any_case(settings: Settings, tmp_path: Path) -> None:
    """A review found `holiday_calendar = "de-be"` refused without a word of `DE-BE`: a
    code is taken in any case and stored as the holidays library spells it (its codes
    differ in more than case), and an unknown one is still refused."""
    url = settings.database_url
    policy = tmp_path / "sla.toml"
    for given, stored in (
        ("de-be", "DE-BE"),
        ("gb-sct", "GB-SCT"),
        ("De-augsburg", "DE-Augsburg"),
        ("de-", "DE"),
    ):
        policy.write_text(f'[queues.billing]\nholiday_calendar = "{given}"\n')
        loaded = run(url, "sla", "load", str(policy))
        assert loaded.returncode == 0, loaded.stderr
        shown = json.loads(run(url, "sla", "show").stdout)
        assert shown["queues"]["billing"]["holiday_calendar"] == stored
    policy.write_text('[queues.billing]\nholiday_calendar = "de-xx"\n')
    assert "holiday calendar 'de-xx'" in one_line(run(url, "sla", "load", str(policy)))
