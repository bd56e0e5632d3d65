"""The published tool contract and its check: every class of change is classified."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ticket_server.admin import contract
from ticket_server.settings import Settings
from ticket_server.tools.toolsets import tools_in

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live() -> dict:
    import asyncio

    return asyncio.run(contract.snapshot(contract.contract_server()))


def tool(snapshot: dict, name: str) -> dict:
    return next(t for t in snapshot["tools"] if t["name"] == name)


def kinds(published: dict, changed: dict) -> set[tuple[str, str]]:
    return {(d.kind, d.what) for d in contract.compare(published, changed)}


def test_committed_contract_matches_the_live_server(live: dict) -> None:
    published = contract.read_contract(ROOT / "tool-contract.json")
    assert contract.compare(published, live) == []
    assert {t["name"] for t in published["tools"]} == {
        "get_ticket_status",
        "search_tickets",
        "get_ticket_status_v2",
        "search_tickets_v2",
        "get_ticket",
        "get_customer",
        "add_internal_note",
        "reply_to_customer",
        "set_ticket_status",
        "assign_ticket",
        "escalate_ticket",
        "update_ticket_tags",
        "set_ticket_fields",
        "count_tickets",
        "open_ticket",
        "get_attachment",
        "find_similar_tickets",
        "link_tickets",
        "merge_tickets",
        "bulk_update_tickets",
    }
    for t in published["tools"]:
        assert {"name", "description", "inputSchema", "outputSchema", "annotations"} <= set(t)


def change(live: dict, name: str, edit) -> dict:
    changed = copy.deepcopy(live)
    edit(tool(changed, name))
    return changed


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # additive
        (
            lambda t: t["inputSchema"]["properties"].update(team={"type": "string", "default": ""}),
            ("additive", "new optional input"),
        ),
        (
            lambda t: t["outputSchema"]["properties"]["tickets"]["items"]["properties"].update(
                customer={"type": "string"}
            ),
            ("additive", "new output field"),
        ),
        (
            lambda t: t["inputSchema"]["properties"]["queue"]["anyOf"][0].update(
                type=["string", "integer"]
            ),
            ("additive", "wider type ['null', 'string'] -> ['integer', 'null', 'string']"),
        ),
        (
            lambda t: t["inputSchema"]["properties"]["limit"].update(maximum=100),
            ("additive", "maximum 50 -> 100"),
        ),
        (lambda t: t.update(description="Better words."), ("additive", "description changed")),
        # an argument's description is read by a model as the tool's is
        (
            lambda t: t["inputSchema"]["properties"]["query"].update(description="Other words."),
            ("additive", "description changed"),
        ),
        (
            lambda t: t["inputSchema"]["properties"]["fields"]["anyOf"][0]["items"].update(
                description="A field and its value."
            ),
            ("additive", "description changed"),
        ),
        (
            lambda t: t["inputSchema"]["properties"]["queue"]["anyOf"][0].update(
                description="A queue's name."
            ),
            ("additive", "description changed"),
        ),
        # breaking
        (
            lambda t: (
                t["inputSchema"]["properties"].update(project={"type": "string"}),
                t["inputSchema"].setdefault("required", []).append("project"),
            ),
            ("breaking", "new required input"),
        ),
        (
            lambda t: t["inputSchema"]["properties"].pop("owner"),
            ("breaking", "input removed or renamed"),
        ),
        (
            lambda t: t["inputSchema"]["properties"].update(
                assignee=t["inputSchema"]["properties"].pop("owner")
            ),
            ("breaking", "input removed or renamed"),
        ),
        (
            lambda t: t["inputSchema"]["properties"]["limit"].update(maximum=20),
            ("breaking", "maximum 50 -> 20"),
        ),
        (
            lambda t: t["inputSchema"]["properties"].update(queue={"type": "integer"}),
            ("breaking", "narrowed type ['null', 'string'] -> ['integer']"),
        ),
        # C22: an optional filter losing its null branch breaks strict clients
        (
            lambda t: t["inputSchema"]["properties"].update(
                queue=t["inputSchema"]["properties"]["queue"]["anyOf"][0]
            ),
            ("breaking", "narrowed type ['null', 'string'] -> ['string']"),
        ),
        (
            lambda t: t["inputSchema"]["properties"]["status"]["anyOf"][0]["items"]["enum"].remove(
                "new"
            ),
            ("breaking", "enum narrowed"),
        ),
        (
            lambda t: t["inputSchema"]["properties"]["status"]["anyOf"][0].update(maxItems=2),
            ("breaking", "maxItems 6 -> 2"),
        ),
        (
            lambda t: t["outputSchema"]["properties"]["tickets"]["items"]["properties"].pop(
                "owner"
            ),
            ("breaking", "output field removed or renamed"),
        ),
        (
            lambda t: t["outputSchema"]["properties"]["tickets"]["items"]["properties"][
                "updated_at"
            ].update(type="integer"),
            ("breaking", "output type changed ['string'] -> ['integer']"),
        ),
        (
            lambda t: t.update(
                outputSchema={
                    "type": "object",
                    "properties": {"result": {"type": "array"}},
                    "x-fastmcp-wrap-result": True,
                }
            ),
            ("breaking", "output shape changed (wrapped result)"),
        ),
        (
            lambda t: t["annotations"].update(readOnlyHint=False),
            ("breaking", "annotation readOnlyHint no longer True"),
        ),
        (
            lambda t: t["annotations"].update(openWorldHint=True),
            ("breaking", "annotation openWorldHint False -> True"),
        ),
        (
            lambda t: t["annotations"].update(destructiveHint=True),
            ("breaking", "annotation destructiveHint None -> True"),
        ),
        (
            lambda t: t["annotations"].update(title="Search"),
            ("breaking", "annotation title None -> 'Search'"),
        ),
    ],
)
def test_each_class_of_change(live: dict, edit, expected: tuple[str, str]) -> None:
    assert expected in kinds(live, change(live, "search_tickets_v2", edit))


def test_tool_added_and_removed(live: dict) -> None:
    fewer = copy.deepcopy(live)
    fewer["tools"] = [t for t in fewer["tools"] if t["name"] != "search_tickets"]
    assert ("breaking", "tool removed or renamed") in kinds(live, fewer)
    assert ("additive", "new tool") in kinds(fewer, live)


def test_output_enum_gaining_a_value_is_breaking(live: dict) -> None:
    changed = change(
        live,
        "get_ticket_status_v2",
        lambda t: t["outputSchema"]["properties"]["status"]["enum"].append("on_hold"),
    )
    assert ("breaking", "output enum gained values") in kinds(live, changed)


def run_check(contract_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ticket_server", "tools", "check", "--contract", str(contract_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_cli_check_passes_on_main() -> None:
    proc = run_check(ROOT / "tool-contract.json")
    assert proc.returncode == 0, proc.stderr
    assert "0 breaking" in proc.stderr


def test_cli_check_fails_naming_a_breaking_change(tmp_path: Path) -> None:
    """The CLI exits non-zero and names the change when the live tools break the
    published contract (here: the published get_ticket_status_v2 took no ticket_id)."""
    published = contract.read_contract(ROOT / "tool-contract.json")
    t = tool(published, "get_ticket_status_v2")
    t["inputSchema"]["properties"].pop("ticket_id")
    t["inputSchema"]["required"] = []
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(published))
    proc = run_check(path)
    assert proc.returncode != 0
    assert "BREAKING get_ticket_status_v2: ticket_id: new required input" in proc.stdout


async def test_adding_a_required_input_to_search_tickets_v2_is_breaking() -> None:
    """Done-when of the contract: a live search_tickets_v2 that gains a required input
    fails the check against the committed contract, named as breaking."""
    from fastmcp.tools import Tool, forward

    server = contract.contract_server()
    original = await server.get_tool("search_tickets_v2")

    async def with_project(project: str, **kwargs):  # the breaking change under test
        return await forward(**kwargs)

    server.add_tool(Tool.from_tool(original, transform_fn=with_project))
    live = await contract.snapshot(server)
    assert "project" in tool(live, "search_tickets_v2")["inputSchema"]["required"]
    differences = contract.compare(contract.read_contract(ROOT / "tool-contract.json"), live)
    assert [str(d) for d in differences if d.kind == "breaking"] == [
        "BREAKING search_tickets_v2: project: new required input"
    ]


def test_the_published_tools_fit_the_model_facing_budget_and_differ(live: dict) -> None:
    """The default toolsets' tools stay within the block a model request can carry
    without hurting tool selection (issue 33, item 3), and no two descriptions read as
    the same tool; the deprecated tools beside their replacements are not flagged."""
    offered = tools_in(Settings.model_fields["toolsets"].default)
    default = {"tools": [t for t in live["tools"] if t["name"] in offered]}
    assert 0 < contract.model_block_tokens(default) <= contract.BLOCK_BUDGET_TOKENS
    assert contract.near_identical(live) == []
    v1 = tool(live, "get_ticket_status")["description"]
    v2 = tool(live, "get_ticket_status_v2")["description"]
    assert contract.description_similarity(v1, v2) > 0.3  # alike, and exempt as versions


def test_near_identical_descriptions_are_flagged(live: dict) -> None:
    """A tool whose description is another's with two words changed is flagged with its
    twin; a description of another job is not."""
    changed = copy.deepcopy(live)
    note = tool(changed, "add_internal_note")
    twin = copy.deepcopy(note)
    twin["name"] = "add_private_note"
    twin["description"] = note["description"].replace("internal", "private", 1)
    changed["tools"].append(twin)
    pairs = contract.near_identical(changed)
    assert [(a, b) for a, b, _ in pairs] == [("add_internal_note", "add_private_note")]
    assert pairs[0][2] >= contract.NEAR_IDENTICAL
    assert contract.description_similarity("Search tickets by words.", "Close a ticket.") < 0.2


def test_cli_check_fails_when_the_block_is_over_budget(tmp_path: Path) -> None:
    """`tools check` exits 2 naming the budget when the live block exceeds it: here the
    budget is lowered below today's block through a wrapper that runs the same CLI."""
    script = tmp_path / "check.py"
    script.write_text(
        "import sys\n"
        "from ticket_server.admin import contract\n"
        "contract.BLOCK_BUDGET_TOKENS = 100\n"
        "from ticket_server.cli import main\n"
        "sys.exit(main(['tools', 'check', '--contract', sys.argv[1]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(ROOT / "tool-contract.json")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "over its budget of 100" in proc.stderr
    assert "model-facing block: " in proc.stderr


@pytest.mark.parametrize(
    ("text", "words"),
    [("{", "not valid JSON"), ("[]", 'no "tools" list'), ('{"tools": 1}', 'no "tools" list')],
)
def test_cli_check_names_a_contract_it_cannot_read(tmp_path: Path, text: str, words: str) -> None:
    """`tools check --contract F` (a review's finding): a file that is not JSON, or JSON
    without a "tools" list, ended in a traceback (exit status 1); it is one line naming
    the file, exit status 2."""
    path = tmp_path / "contract.json"
    path.write_text(text)
    proc = run_check(path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and str(path) in proc.stderr and words in proc.stderr


def test_cli_snapshot_names_a_contract_it_cannot_write(tmp_path: Path) -> None:
    """`tools snapshot --contract F` into a folder that does not exist (a review's
    finding) ended in a traceback; it is one line naming the file, exit status 2."""
    path = tmp_path / "missing" / "contract.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ticket_server", "tools", "snapshot", "--contract", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert str(path) in proc.stderr and "cannot write" in proc.stderr
