"""The tool block and results, round two: OpenAI strict mode (the Agents SDK's conversion,
when every tool qualifies), the Responses API, images and resources converted for each
provider, a block built from the servers that are up, tools the application's
permissions forbid never shown, annotations that tighten an envelope, the kit's name in
the handshake, typed results, resources and prompts. Against server-everything (npm),
our own server and servers.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import BaseModel

from tests.admin.test_export import OPENAI_TOOLS
from tests.client.conftest import everything, kit_server, ours_stdio
from ticket_server.client import KitConfig, ServerConfig, ToolConfig
from ticket_server.client.adapters import strict_problem, strict_schema
from ticket_server.client.kit import Kit, ToolFailed

LOCKED_READ = {"surface": "locked", "side_effecting": False, "reversible": True}
EVERYTHING_TOOLS = [
    "echo",
    "get-sum",
    "get-tiny-image",
    "get-resource-links",
    "get-resource-reference",
]


def config(bin_dir: Path, db_path: Path, *extra: ServerConfig) -> KitConfig:
    servers = [
        everything(
            bin_dir, envelope=LOCKED_READ, tools={name: ToolConfig() for name in EVERYTHING_TOOLS}
        ),
        ours_stdio(
            db_path,
            envelope=LOCKED_READ,
            tools={"get_ticket_status_v2": ToolConfig(), "search_tickets_v2": ToolConfig()},
        ),
        *extra,
    ]
    return KitConfig(servers={s.name: s for s in servers}, permissions=frozenset({"tickets:read"}))


def closed_everywhere(schema) -> bool:
    if isinstance(schema, list):
        return all(closed_everywhere(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return False
        if sorted(schema.get("required", [])) != sorted(schema.get("properties", {})):
            return False
    return all(closed_everywhere(v) for v in schema.values())


async def test_openai_strict_mode_when_every_tool_qualifies(reference_servers: Path, db_path: Path):
    async with Kit(config(reference_servers, db_path), audit=lambda e: None) as kit:
        block = await kit.tool_block()
        assert block.strict_ok, block.strict_problems
        default = block.tools("openai")
        assert all("strict" not in t["function"] for t in default)  # unchanged unless asked
        strict = block.tools("openai", strict="auto")
        jsonschema.validate(strict, OPENAI_TOOLS)
        for tool in strict:
            function = tool["function"]
            assert function["strict"] is True and "$schema" not in function["parameters"]
            assert closed_everywhere(function["parameters"]), function["name"]
            jsonschema.Draft202012Validator.check_schema(function["parameters"])
        links = next(t for t in strict if t["function"]["name"] == "everything__get-resource-links")
        assert links["function"]["parameters"]["properties"]["count"]["type"] == ["number", "null"]
        responses = block.tools("openai-responses", strict="auto")
        assert {t["type"] for t in responses} == {"function"} and all(
            t["strict"] for t in responses
        )

        # A strict model sends null for what it leaves out: the kit removes those nulls.
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "everything__get-resource-links", "arguments": '{"count": null}'},
        }
        answer = await block.dispatch("openai", call)
        assert not answer["content"].startswith("Error") and "demo://resource" in answer["content"]
        search = {
            "type": "function_call",
            "call_id": "fc_1",
            "name": "tickets__search_tickets_v2",
            "arguments": json.dumps(
                {
                    k: (None if k != "query" else "invoice")
                    for k in next(
                        t for t in responses if t["name"] == "tickets__search_tickets_v2"
                    )["parameters"]["properties"]
                }
            ),
        }
        answer = await block.dispatch("openai-responses", search)
        assert answer["type"] == "function_call_output" and '"SUP-' in answer["output"]


def test_a_schema_strict_mode_cannot_express_is_named():
    assert strict_problem({"type": "object", "properties": {"a": {"type": "string"}}}) is None
    assert "patternProperties" in strict_problem(
        {"type": "object", "properties": {"m": {"type": "object", "patternProperties": {}}}}
    )
    assert "additionalProperties" in strict_problem(
        {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}
    )
    converted = strict_schema(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            },
            "required": ["a"],
        }
    )
    assert converted == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }


def provider_call(provider: str, name: str, arguments: dict) -> dict:
    if provider == "openai":
        return {
            "id": "c1",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
    if provider == "openai-responses":
        return {
            "type": "function_call",
            "call_id": "c1",
            "name": name,
            "arguments": json.dumps(arguments),
        }
    if provider == "anthropic":
        return {"type": "tool_use", "id": "c1", "name": name, "input": arguments}
    return {"functionCall": {"id": "c1", "name": name, "args": arguments}}


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic", "gemini"])
async def test_images_and_resources_are_converted_for_each_provider(
    reference_servers: Path, db_path: Path, provider: str
):
    async with Kit(config(reference_servers, db_path), audit=lambda e: None) as kit:
        block = await kit.tool_block()
        messages = await block.dispatch_messages(
            provider, provider_call(provider, "everything__get-tiny-image", {})
        )
        links = await block.dispatch(
            provider, provider_call(provider, "everything__get-resource-links", {"count": 2})
        )
        embedded = await block.dispatch(
            provider,
            provider_call(
                provider,
                "everything__get-resource-reference",
                {"resourceType": "Text", "resourceId": 1},
            ),
        )
    answer = messages[0]
    if provider == "openai":
        assert answer["role"] == "tool" and "image/png" in answer["content"]
        (follow,) = messages[1:]
        url = follow["content"][1]["image_url"]["url"]
    elif provider == "openai-responses":
        (image,) = [p for p in answer["output"] if p["type"] == "input_image"]
        url = image["image_url"]
    elif provider == "anthropic":
        (image,) = [b for b in answer["content"] if b["type"] == "image"]
        url = f"data:{image['source']['media_type']};base64,{image['source']['data']}"
    else:
        (part,) = answer["functionResponse"]["parts"]
        url = f"data:{part['inlineData']['mimeType']};base64,{part['inlineData']['data']}"
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for answer, expected in (
        (links, "demo://resource/dynamic/text/2"),
        (embedded, "demo://resource/"),
    ):
        assert expected in json.dumps(answer), answer


async def test_a_block_is_built_from_the_servers_that_are_up(
    reference_servers: Path, db_path: Path, tmp_path: Path
):
    gone = ServerConfig(
        name="gone",
        transport="stdio",
        command=[str(tmp_path / "missing")],
        tools={"x": ToolConfig()},
    )
    async with Kit(config(reference_servers, db_path, gone), audit=lambda e: None) as kit:
        block = await kit.tool_block()
        assert (
            "everything__echo" in block.by_name and "tickets__get_ticket_status_v2" in block.by_name
        )
        assert list(block.missing) == ["gone"] and "could not connect" in block.missing["gone"]
        answer = await block.dispatch("anthropic", provider_call("anthropic", "gone__x", {}))
        assert answer["is_error"] and "not reachable now: gone" in answer["content"]
        report = await kit.check()
    assert not report.ok
    assert [(s.server, s.ok) for s in report.servers] == [
        ("everything", True),
        ("tickets", True),
        ("gone", False),
    ]
    assert (
        report.servers[0].method == "initialize" and report.servers[1].method == "server/discover"
    )
    assert report.lines()[2].startswith("gone: FAILED: ")


async def test_permissions_and_annotations_decide_what_the_model_sees(
    reference_servers: Path, db_path: Path
):
    server = everything(
        reference_servers,
        envelope=LOCKED_READ,
        tools={
            "echo": ToolConfig(),
            "get-sum": ToolConfig(required_permission="math:use"),
            # readOnlyHint false + destructiveHint false: a change all the same.
            "toggle-simulated-logging": ToolConfig(side_effecting=False),
        },
    )
    ours = ours_stdio(
        db_path,
        envelope=LOCKED_READ,
        tools={"get_ticket_status_v2": ToolConfig(required_permission="tickets:admin")},
    )
    kit_config = KitConfig(
        servers={"everything": server, "tickets": ours}, permissions=frozenset({"tickets:read"})
    )
    async with Kit(kit_config, audit=lambda e: None) as kit:
        shown = [(t.server, t.name) for t in await kit.visible_tools()]
        toggle = await kit.definition("everything", "toggle-simulated-logging")
    assert shown == [("everything", "echo"), ("everything", "toggle-simulated-logging")]
    assert toggle.envelope.side_effecting and toggle.envelope.needs_approval


async def test_the_kit_names_itself_in_the_handshake():
    from importlib.metadata import version

    server = ServerConfig(
        name="plain",
        transport="stdio",
        command=kit_server("plain"),
        mode="legacy",
        envelope=LOCKED_READ,
        tools={"whoami": ToolConfig()},
    )
    async with Kit(KitConfig(servers={"plain": server}), audit=lambda e: None) as kit:
        result = await kit.call("plain", "whoami")
    assert result.content[0].text == f"ticket-server-client-kit {version('ticket-server')}"


class Status(BaseModel):
    id: str
    status: str


class Weather(BaseModel):
    temperature: float
    conditions: str


async def test_typed_results_errors_raised_on_request_resources_and_prompts(
    reference_servers: Path, db_path: Path
):
    async with Kit(config(reference_servers, db_path), audit=lambda e: None) as kit:
        status = await kit.call_typed(
            "tickets", "get_ticket_status_v2", {"ticket_id": "SUP-4412"}, Status
        )
        assert status.id == "SUP-4412" and status.status
        kit.pin("everything", "get-structured-content")
        weather = await kit.call_typed(
            "everything", "get-structured-content", {"location": "Chicago"}, Weather
        )
        assert isinstance(weather.temperature, float)

        with pytest.raises(ToolFailed, match="SUP-0000000") as caught:
            await kit.call(
                "tickets", "get_ticket_status_v2", {"ticket_id": "SUP-0000000"}, raise_on_error=True
            )
        assert caught.value.result.is_error
        assert (
            await kit.call("tickets", "get_ticket_status_v2", {"ticket_id": "SUP-0000000"})
        ).is_error

        resources = await kit.resources("everything")
        assert any(str(r.uri).startswith("demo://") for r in resources)
        contents = await kit.read_resource("everything", str(resources[0].uri))
        assert contents and str(contents[0].uri) == str(resources[0].uri)
        prompts = await kit.prompts("everything")
        simple = next(p for p in prompts if "simple" in p.name)
        assert (await kit.get_prompt("everything", simple.name)).messages
        ours = await kit.prompts("tickets")
        assert ours, "our server lists prompts"
        manifest = await kit.read_resource("tickets", "tickets://manifest")
        assert manifest and manifest[0].text
