"""The README runs as written (issue 17 item 8): every `ticket-server` command in its shell
blocks is spelt as run from the repository (`.venv/bin/ticket-server`) and parses with the
real argument parser; every command named inline exists; its Python blocks compile and
call current tools only; it links nothing outside the repository."""

from __future__ import annotations

import io
import json
import re
import shlex
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ticket_server.cli import build_parser
from ticket_server.tools.versions import ToolVersions

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
COMMAND = ".venv/bin/ticket-server"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def shell_commands() -> list[list[str]]:
    """Each `ticket-server` invocation in the README's sh blocks, as argv (inside `$(...)`
    and after `VAR=` too); continuation lines joined, comments dropped."""
    found = []
    for block in blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words or words[0] in ("make", "npx", "export"):
                continue
            if "=$(" in words[0]:  # TOKEN=$(.venv/bin/ticket-server ...)
                words = shlex.split(line.split("=$(", 1)[1].rsplit(")", 1)[0])
            found.append(words)
    return found


def test_shell_blocks_hold_commands() -> None:
    assert len(shell_commands()) >= 10


@pytest.mark.parametrize("argv", shell_commands(), ids=lambda argv: " ".join(argv[1:4]))
def test_each_shell_command_is_spelt_as_run_and_parses(argv: list[str]) -> None:
    assert argv[0] == COMMAND, f"run it as {COMMAND}: {argv}"
    build_parser().parse_args(argv[1:])  # argparse exits (status 2) on anything unknown


def test_every_inline_command_exists() -> None:
    """`ticket-server X Y` named in the prose or the commands table is a real (sub)command:
    its `--help` answers (exit 0) where an unknown one is a usage error (exit 2)."""
    spans = re.findall(r"`(?:\.venv/bin/)?ticket-server ([a-z][a-z ]*)", README)
    assert len(spans) > 20
    for span in {" ".join(span.split()[:2]) for span in spans}:
        with (
            redirect_stdout(io.StringIO()),
            redirect_stderr(io.StringIO()),
            pytest.raises(SystemExit) as done,
        ):
            build_parser().parse_args([*span.split(), "--help"])
        assert done.value.code == 0, f"`ticket-server {span}` is not a command"


def test_python_blocks_compile_and_call_current_tools() -> None:
    published = {
        tool["name"] for tool in json.loads((ROOT / "tool-contract.json").read_text())["tools"]
    }
    versions = ToolVersions.with_dates({})
    called = []
    for block in blocks("python"):
        compile(block, "README.md", "exec")  # a top-level `await` or `async with` fails here
        called += re.findall(r'call_tool\("([a-z0-9_]+)"', block)
    assert called
    for name in called:
        assert name in published and versions.get(name) is None, f"{name}: use the current tool"


def test_no_link_outside_the_repository() -> None:
    targets = re.findall(r"\]\(([^)]+)\)", README) + re.findall(r"<(https?://[^>]+)>", README)
    for target in targets:
        assert "://" not in target, f"link outside the repository: {target}"
        assert (ROOT / target.split("#")[0]).exists(), target


def test_the_tools_table_names_every_argument() -> None:
    """Each row of the README's Tools table names every argument its tool takes (issue 32:
    the search row lacked some of its filters)."""
    import asyncio

    from ticket_server.admin import contract

    live = asyncio.run(contract.snapshot(contract.contract_server()))
    section = README.split("\n## Tools\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        match.group(1): match.group(2)
        for match in re.finditer(r"^\| `(\w+)` \| [^|]+ \| (.*?) \|", section, re.M)
    }
    assert rows, "no Tools table in README.md"
    tools = {tool["name"]: tool for tool in live["tools"]}
    assert {"search_tickets_v2", "get_ticket"} <= set(rows)
    for name, arguments in rows.items():
        tool = tools[name]
        missing = [a for a in tool["inputSchema"]["properties"] if f"`{a}`" not in arguments]
        assert not missing, f"README Tools table, {name}: no {', '.join(missing)}"


def test_the_commands_table_names_every_command() -> None:
    """Every (sub)command the parser knows has its row in "## Commands" (a review found
    `audit prune` and `tools toolsets` in the prose only)."""
    import argparse

    table = README.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]

    def children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    missing = []
    for name, command in children(build_parser()).items():
        for sub in children(command) or {"": command}:
            if not re.search(rf"`ticket-server {name}\b[^|]*{sub}", table) and (
                f"`{name} {sub}" not in table
            ):
                missing.append(f"{name} {sub}".strip())
    assert missing == []
