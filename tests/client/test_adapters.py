"""Provider adapters: the visible set as OpenAI, Anthropic and Gemini `tools` (checked
against each provider's published shape, as `tools export` is), namespaced names that
never collide, a provider's tool call dispatched and answered, and the CLI's schema
block figures."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import jsonschema
import pytest

from tests.admin.test_export import ANTHROPIC_TOOLS, GEMINI_TOOLS, OPENAI_TOOLS
from tests.client.conftest import TICKET_SERVER, TIME_SERVER, kit_server, ours_stdio
from ticket_server.client import KitConfig, ServerConfig, ToolConfig
from ticket_server.client.adapters import measure, provider_name
from ticket_server.client.kit import Kit

LOCKED_READ = {"surface": "locked", "side_effecting": False, "reversible": True}
SHAPES = {"openai": OPENAI_TOOLS, "anthropic": ANTHROPIC_TOOLS, "gemini": GEMINI_TOOLS}


def config(db_path: Path) -> KitConfig:
    """Our server, mcp-server-time as a second namespace, and two servers that both
    have a tool called `echo`."""
    servers = [
        ours_stdio(
            db_path,
            envelope=LOCKED_READ,
            tools={
                "get_ticket_status_v2": ToolConfig(),
                "search_tickets_v2": ToolConfig(visible=False),
            },
        ),
        ServerConfig(
            name="time",
            namespace="clock",
            transport="stdio",
            command=TIME_SERVER,
            envelope=LOCKED_READ,
            tools={"get_current_time": ToolConfig()},
        ),
        ServerConfig(
            name="plain",
            transport="stdio",
            command=kit_server("plain"),
            envelope=LOCKED_READ,
            tools={"echo": ToolConfig()},
        ),
        ServerConfig(
            name="grow",
            transport="stdio",
            command=kit_server("grow"),
            envelope=LOCKED_READ,
            tools={"echo": ToolConfig()},
        ),
    ]
    return KitConfig(servers={s.name: s for s in servers})


def declarations(provider: str, block) -> list[dict]:
    if provider == "gemini":
        return block[0]["functionDeclarations"]
    return [t["function"] for t in block] if provider == "openai" else block


VISIBLE = ["tickets__get_ticket_status_v2", "clock__get_current_time", "plain__echo", "grow__echo"]


def check_shape(provider: str, block) -> None:
    jsonschema.validate(block, SHAPES[provider])
    listed = declarations(provider, block)
    assert [d["name"] for d in listed] == VISIBLE  # search_tickets_v2 is pinned but not shown
    key = {"openai": "parameters", "anthropic": "input_schema", "gemini": "parametersJsonSchema"}[
        provider
    ]
    for declaration in listed:
        jsonschema.Draft202012Validator.check_schema(declaration[key])
    status = next(d for d in listed if d["name"] == "tickets__get_ticket_status_v2")
    assert "ticket_id" in status[key]["properties"] and status["description"]


def test_provider_names_are_legal_and_unique():
    assert provider_name("docs", "search") != provider_name("tickets", "search")
    assert provider_name("kb", "files/read.v2") == "kb__files_read_v2"
    long_a, long_b = provider_name("kb", "x" * 70 + "a"), provider_name("kb", "x" * 70 + "b")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b


CALLS = {
    "openai": lambda name, args: {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    },
    "anthropic": lambda name, args: {
        "type": "tool_use",
        "id": "toolu_1",
        "name": name,
        "input": args,
    },
    "gemini": lambda name, args: {"functionCall": {"id": "fc_1", "name": name, "args": args}},
}


def answer_text(provider: str, answer: dict) -> tuple[str, bool]:
    """(what the model reads, whether it is marked an error), checking the answer's shape."""
    if provider == "openai":
        assert (
            set(answer) == {"role", "tool_call_id", "content"}
            and answer["tool_call_id"] == "call_1"
        )
        return answer["content"], answer["content"].startswith("Error: ")
    if provider == "anthropic":
        assert answer["type"] == "tool_result" and answer["tool_use_id"] == "toolu_1"
        return answer["content"], answer["is_error"]
    body = answer["functionResponse"]
    assert body["id"] == "fc_1" and isinstance(body["response"], dict)
    return json.dumps(body["response"]), "error" in body["response"]


async def check_round_trip(provider: str, block) -> None:
    make = CALLS[provider]

    content, error = answer_text(
        provider,
        await block.dispatch(
            provider, make("tickets__get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        ),
    )
    assert not error and '"SUP-4412"' in content

    content, error = answer_text(
        provider, await block.dispatch(provider, make("grow__echo", {"text": "from grow"}))
    )
    assert not error and "from grow" in content
    content, error = answer_text(
        provider,
        await block.dispatch(
            provider, make("clock__get_current_time", {"timezone": "Europe/Paris"})
        ),
    )
    assert not error and "Europe/Paris" in content

    content, error = answer_text(
        provider, await block.dispatch(provider, make("plain__echo", {"txt": "x"}))
    )
    assert (
        error
        and "invalid arguments for plain.echo: txt: not an argument of this tool; text: Field required"
        in content
    )
    content, error = answer_text(
        provider, await block.dispatch(provider, make("tickets__search_tickets_v2", {}))
    )
    assert (
        error and "unknown tool 'tickets__search_tickets_v2'" in content
    )  # not in the visible set


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_each_provider_gets_the_visible_set_and_its_calls_answered(db_path: Path, provider):
    # The kit is entered in the test's own task: its sessions' task group belongs there.
    async with Kit(config(db_path), audit=lambda e: None) as kit:
        block = await kit.tool_block()
        check_shape(provider, block.tools(provider))
        await check_round_trip(provider, block)
        check_cost(provider, block)


def check_cost(provider: str, block) -> None:
    cost = block.cost(provider, 3.0)
    size, tokens = measure(block.tools(provider))
    assert (cost.tools, cost.bytes, cost.tokens) == (4, size, tokens) and tokens == math.ceil(
        size / 4
    )
    assert cost.usd_per_request == pytest.approx(tokens * 3.0 / 1e6)
    assert (
        cost.line()
        == f"{provider}: 4 tool(s), {size} bytes, ~{tokens} tokens, ~${tokens * 3e-6:.6f} per request"
    )


def test_the_cli_prints_the_figures(db_path: Path, tmp_path: Path):
    path = tmp_path / "kit.toml"
    tickets = ours_stdio(db_path)
    path.write_text(
        "[servers.tickets]\ntransport = 'stdio'\n"
        f"command = {json.dumps(tickets.command)}\nenv = {{ TICKET_SERVER_DATABASE_URL = {json.dumps(tickets.env['TICKET_SERVER_DATABASE_URL'])} }}\n"
        "envelope = { surface = 'locked', side_effecting = false }\n"
        "[servers.tickets.tools.get_ticket_status_v2]\n[servers.tickets.tools.search_tickets_v2]\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [*TICKET_SERVER, "client", "tools", str(path), "--price", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["openai", "anthropic", "gemini"]
    assert all(" 2 tool(s), " in line and " per request" in line for line in lines[:3])
    assert lines[3].startswith("tokens estimated as bytes / 4")

    done = subprocess.run(
        [*TICKET_SERVER, "client", "tools", str(path), "--provider", "anthropic", "--print"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    block = json.loads(done.stdout)
    jsonschema.validate(block, ANTHROPIC_TOOLS)
    size, tokens = measure(block)
    assert f"anthropic: 2 tool(s), {size} bytes, ~{tokens} tokens" in done.stderr

    done = subprocess.run(
        [*TICKET_SERVER, "client", "tools", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "none.toml" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("price", ["-3", "nan", "inf"])
def test_the_cli_refuses_a_price_that_is_no_price(tmp_path: Path, price: str):
    """`client tools --price -3` (a review's finding) printed a negative cost per request,
    and `nan` "~$nan"; it is one line naming --price, exit status 2, before any server
    is started."""
    path = tmp_path / "kit.toml"
    path.write_text("[servers.x]\ntransport = 'stdio'\ncommand = ['/nonexistent']\n")
    done = subprocess.run(
        [*TICKET_SERVER, "client", "tools", str(path), "--price", price],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "--price" in done.stderr, done.stderr


async def test_tools_whose_names_collide_once_sanitised_both_get_a_provider_name():
    """`a.b` and `a_b` both become `grow__a_b`: building the block raised KitError. Each
    now ends in a hash of its own name (as a name too long does), and neither keeps
    `grow__a_b`, which named `a_b` while it was alone: a name a model learned never
    calls another tool. The block says so in ``renamed`` and the audit log."""
    server = ServerConfig(
        name="grow",
        transport="stdio",
        command=kit_server("grow"),
        envelope=LOCKED_READ,
        tools={name: ToolConfig() for name in ("add_tool", "a.b", "a_b")},
    )
    events: list[dict] = []
    async with Kit(KitConfig(servers={"grow": server}), audit=events.append) as kit:
        await kit.call("grow", "add_tool", {"name": "a_b"})
        await kit.tools("grow", refresh=True)
        alone = await kit.tool_block()
        assert alone.by_name["grow__a_b"].name == "a_b" and not alone.renamed
        await kit.call("grow", "add_tool", {"name": "a.b"})
        await kit.tools("grow", refresh=True)
        block = await kit.tool_block()
        names = [d["name"] for d in block.tools("anthropic")]
        dotted, plain = provider_name("grow", "a.b", salt=1), provider_name("grow", "a_b", salt=1)
        assert sorted(names) == sorted(["grow__add_tool", dotted, plain]) and dotted != plain
        assert "grow__a_b" not in block.by_name and set(block.renamed) == {dotted, plain}
        assert "grow.a.b" in block.renamed[plain] and "grow.a_b" in block.renamed[plain]
        logged = {e["tool"]: e["name"] for e in events if e["event"] == "renamed"}
        assert logged == {"a.b": dotted, "a_b": plain}
        for name, tool in ((dotted, "a.b"), (plain, "a_b")):
            content, error = answer_text(
                "anthropic", await block.dispatch("anthropic", CALLS["anthropic"](name, {}))
            )
            assert not error and json.loads(content) == {"result": tool}
