"""The client matrix: agent frameworks, each in its own pinned environment, against the
real server over stdio and Streamable HTTP (bearer token). No model is involved: each
framework lists the tools, converts them as it would for a model, and makes every call
of a plan derived from tools/list, so a new tool is covered the day it is listed.

The environments are installed once into .cache/frameworks/NAME by
.ci/frameworks/install.sh (stamped by a hash of the pinned files). Without a way to
install them (no npm, no package index) the tests skip, unless the environment variable
CI is set: in CI they must run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from tests.clients.conftest import example_arguments, stdio_params
from tests.tools.test_optional_arguments import FILTERS, STATUSES, allows_null
from tests.transports.conftest import (  # noqa: F401  (re-exported fixture)
    HttpServer,
    http_server,
)
from ticket_server.server import build_server

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / ".ci" / "frameworks"
INSTALL = PINS / "install.sh"
UNKNOWN_ID = "SUP-999999"
TICKET_ID = re.compile(r"SUP-\d+")


def install(name: str) -> Path:
    """The framework's environment directory, installed if its pins changed."""
    if (
        name == "mcp-remote"
        and shutil.which("npm") is None
        and not (ROOT / ".cache" / "frameworks" / name / ".installed").exists()
    ):
        if os.environ.get("CI"):
            pytest.fail("npm is needed to install mcp-remote, and CI is set")
        pytest.skip("npm not found: cannot install mcp-remote (set CI to make this fail)")
    python = getattr(sys, "_base_executable", sys.executable)
    done = subprocess.run(
        ["bash", str(INSTALL), name, python], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"installing {name} failed: {done.stderr[-3000:]}")
        pytest.skip(f"installing {name} failed (no package index?): {done.stderr[-500:]}")
    return Path(done.stdout.strip().splitlines()[-1])


async def listed_tools(settings) -> list[Any]:  # type: ignore[no-untyped-def]
    async with Client(build_server(settings)) as client:
        return list(await client.list_tools())


def call_plan(tools: list[Any]) -> list[dict[str, Any]]:
    """Every tool once with working arguments; again the way a strict client sends them
    (every nullable optional argument as null); C22's blank filters; an unknown id."""
    plan: list[dict[str, Any]] = []
    for tool in tools:
        schema = tool.input_schema
        arguments = example_arguments(schema)
        plan.append({"tool": tool.name, "arguments": arguments, "expect": "ok"})
        required = set(schema.get("required", []))
        nulls = {
            n: None
            for n, s in schema.get("properties", {}).items()
            if n not in required and allows_null(s)
        }
        if nulls:
            plan.append(
                {
                    "tool": tool.name,
                    "arguments": {**arguments, **nulls},
                    "expect": "same",
                    "as": len(plan) - 1,
                }
            )
    names = [t.name for t in tools]
    if "search_tickets_v2" in names:
        first = next(i for i, c in enumerate(plan) if c["tool"] == "search_tickets_v2")
        blank = {
            "query": "invoice",
            "queue": "",
            "owner": "",
            "status": STATUSES,
            "updated_after": "1970-01-01T00:00:00Z",
            "cursor": "",
            "limit": 10,
        }
        plan.append(
            {"tool": "search_tickets_v2", "arguments": blank, "expect": "same", "as": first}
        )
    if "get_ticket_status_v2" in names:
        plan.append(
            {
                "tool": "get_ticket_status_v2",
                "arguments": {"ticket_id": UNKNOWN_ID},
                "expect": "error",
            }
        )
    return plan


README = ROOT / "README.md"
README_URL = "http://127.0.0.1:8000/mcp"


def readme_snippet(name: str) -> tuple[str, str]:
    """(language, code) of the block after `<!-- framework-snippet: NAME -->` in the README."""
    match = re.search(
        rf"<!-- framework-snippet: {re.escape(name)} -->\s*```(\w+)\n(.*?)```",
        README.read_text(),
        re.S,
    )
    assert match, f"no `framework-snippet: {name}` in README.md"
    assert README_URL in match.group(2), (
        "a snippet names the default local URL, which the test replaces"
    )
    return match.group(1), match.group(2)


def run_readme_snippet(name: str, python: Path, server: HttpServer, tmp_path: Path) -> str:
    """Run the README's Python snippet for ``name`` against ``server``; its stdout."""
    language, code = readme_snippet(name)
    assert language == "python"
    script = tmp_path / f"readme_{name.replace('-', '_')}.py"
    script.write_text(code.replace(README_URL, server.url))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TICKET_SERVER_", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(HOME=str(tmp_path), TICKETS_TOKEN=server.token or "")
    done = subprocess.run(
        [str(python), str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"README snippet {name} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def run_framework(
    command: list[str], config: dict[str, Any], tmp_path: Path, timeout: float = 300
) -> dict[str, Any]:
    """Run a framework's runner with ``config``; its JSON document."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TICKET_SERVER_", "VIRTUAL_ENV", "PYTHON"))
    }
    env["HOME"] = str(
        tmp_path
    )  # caches and token stores of the frameworks stay in the test's tmp dir
    done = subprocess.run(
        [*command, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"runner failed ({done.returncode}):\n{done.stderr[-4000:]}"
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        pytest.fail(
            f"runner did not print one JSON document: {done.stdout[-2000:]!r}\n{done.stderr[-2000:]}"
        )


def server_config(transport: str, request: pytest.FixtureRequest, db_path: Path) -> dict[str, Any]:
    """How a framework reaches our server: the stdio command, or the HTTP URL and token."""
    if transport == "stdio":
        params = stdio_params(db_path, TICKET_SERVER_LOG_LEVEL="WARNING")
        return {
            "transport": "stdio",
            "command": params.command,
            "args": list(params.args),
            "env": params.env,
        }
    server: HttpServer = request.getfixturevalue("http_server")
    return {"transport": "http", "url": server.url, "token": server.token}


def check_schemas(out: dict[str, Any], tools: list[Any]) -> None:
    """The framework saw every tool; its strict conversion keeps a way to omit each
    optional argument (null allowed, or not required) and null for every C22 filter."""
    assert set(out["tools"]) == {t.name for t in tools}, out["tools"].keys()
    for tool in tools:
        original = tool.input_schema
        required = set(original.get("required", []))
        converted = out["tools"][tool.name]
        assert set(converted["schema"].get("properties", {})) == set(
            original.get("properties", {})
        ), tool.name
        strict = converted.get("strict_schema")
        if strict is None:
            continue
        strict_required = set(strict.get("required", []))
        for name, prop in strict.get("properties", {}).items():
            if name in required or not allows_null(original["properties"][name]):
                continue
            assert name not in strict_required or allows_null(prop), (
                out["framework"],
                tool.name,
                name,
                prop,
            )
        if tool.name == "search_tickets_v2":
            for name in FILTERS:
                assert allows_null(strict["properties"][name]), (
                    out["framework"],
                    name,
                    strict["properties"][name],
                )


def check_calls(out: dict[str, Any], plan: list[dict[str, Any]]) -> None:
    """Working calls answer without isError; a strict client's nulls and blanks give the
    same answer as the plain call; an unknown id is an isError naming it."""
    assert len(out["calls"]) == len(plan)
    for call, result in zip(plan, out["calls"], strict=True):
        label = (out["framework"], call["tool"], call["arguments"], result["text"][:300])
        if call["expect"] == "error":
            assert result["is_error"] is True, label
            assert "No ticket with id" in result["text"] and UNKNOWN_ID in result["text"], label
            continue
        assert result["is_error"] is False, label
        if "ticket_id" in call["arguments"] or call["arguments"].get("query"):
            assert "SUP-" in result["text"], label
        if call["expect"] == "same":  # the same tickets (a cursor is tied to the filters sent)
            assert TICKET_ID.findall(result["text"]) == TICKET_ID.findall(
                out["calls"][call["as"]]["text"]
            ), label
