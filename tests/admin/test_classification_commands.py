"""`ticket-server tags ...` and `ticket-server fields ...`: the vocabulary and the field
definitions an operator keeps (never a silent delete), each mistake one line with exit
status 2 and nothing changed; `fields load` takes TOML or JSON, all or nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_operator_cli import one_line, run
from ticket_server import cli
from ticket_server.settings import Settings


@pytest.fixture
def ts(settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """ts(*args) -> (exit status, stdout, stderr) of the CLI run in this process."""
    monkeypatch.setenv("TICKET_SERVER_DATABASE_URL", settings.database_url)

    def call(*args: str) -> tuple[int, str, str]:
        status = cli.main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return call


def test_tags_add_list_deactivate(ts) -> None:
    assert ts("tags", "add", "  Churn Risk ", "--description", "may leave")[0] == 0
    status, out, _ = ts("tags", "list", "--json")
    tags = {t["name"]: t for t in map(json.loads, out.splitlines())}
    assert tags["churn risk"] == {
        "name": "churn risk",
        "description": "may leave",
        "active": True,
        "tickets": 0,
    }
    assert tags["vip"]["tickets"] > 0  # the sample's tags are on its tickets
    for args, expected in (
        (("tags", "add", "CHURN RISK"), "exists already (active)"),
        (("tags", "add", "a,b"), "is not a tag name"),
        (("tags", "deactivate", "nope"), "no tag 'nope'"),
    ):
        status, out, err = ts(*args)
        assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert expected in err
    assert ts("tags", "deactivate", "vip")[0] == 0
    status, _, err = ts("tags", "deactivate", "vip")
    assert status == 2 and "deactivated already" in err
    _, out, _ = ts("tags", "list", "--json")
    vip = next(t for t in map(json.loads, out.splitlines()) if t["name"] == "vip")
    assert vip["active"] is False and vip["tickets"] == tags["vip"]["tickets"]  # nothing deleted


def test_fields_add_load_list_deactivate(ts, tmp_path: Path) -> None:
    assert (
        ts("fields", "add", "plan_tier", "--type", "enum", "--value", "free", "--value", "pro")[0]
        == 0
    )
    toml = tmp_path / "fields.toml"
    toml.write_text(
        '[[field]]\nname = "region_code"\ntype = "text"\nlabel = "Region"\n\n'
        '[[field]]\nname = "refund_amount"\ntype = "number"\nrequired = true\nqueues = ["billing"]\n'
    )
    assert ts("fields", "load", str(toml))[0] == 0
    as_json = tmp_path / "fields.json"
    as_json.write_text(
        json.dumps([{"name": "go_live", "type": "date"}, {"name": "bad name", "type": "text"}])
    )
    for args, expected in (
        (("fields", "load", str(as_json)), "field 2: name must be"),
        (("fields", "add", "plan_tier", "--type", "text"), "exists already"),
        (("fields", "add", "colour", "--type", "enum"), "an enum needs values"),
        (("fields", "add", "site", "--type", "text", "--queue", "nowhere"), "no queue 'nowhere'"),
        (("fields", "load", str(tmp_path / "missing.toml")), "No such file"),
        (("fields", "deactivate", "nope"), "no field 'nope'"),
    ):
        status, out, err = ts(*args)
        assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert expected in err, err
    assert ts("fields", "deactivate", "plan_tier")[0] == 0
    _, out, _ = ts("fields", "list", "--json")
    fields = {f["name"]: f for f in map(json.loads, out.splitlines())}
    assert "go_live" not in fields  # the file with a mistake added nothing
    assert fields["refund_amount"] == {
        "name": "refund_amount",
        "label": "refund_amount",
        "type": "number",
        "values": None,
        "required": True,
        "queues": ["billing"],
        "active": True,
    }
    assert fields["plan_tier"]["active"] is False and fields["plan_tier"]["values"] == [
        "free",
        "pro",
    ]


@pytest.mark.sqlite_only
def test_a_mistake_is_one_line_from_the_installed_command(database_url: str) -> None:
    line = one_line(run(database_url, "fields", "add", "x", "--type", "enum"))
    assert "an enum needs values" in line
