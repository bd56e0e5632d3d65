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
    assert shown["queues"]["billing"]["targets"]["high"] == {
        "first_response": 60,
        "resolution": 480,
    }

    (tmp_path / "bad.toml").write_text('[queues.billing]\ntime_zone = "Mars/Base"\n')
    assert "queue billing" in one_line(run(url, "sla", "load", str(tmp_path / "bad.toml")))
    assert json.loads(run(url, "sla", "show").stdout) == shown  # nothing changed

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
