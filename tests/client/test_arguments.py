"""A model's arguments before they leave: a malformed tool call is an answer the model
reads, never an exception (C44), and the verdict on arguments is JSON Schema's, with
the arguments sent as given (C45); against server-everything (npm, written by others),
servers.py and our own server."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.client.conftest import everything, kit_server, ours_stdio
from ticket_server.client import KitConfig, ServerConfig, ToolConfig
from ticket_server.client.kit import Kit
from ticket_server.client.tools import InvalidArguments

LOCKED_READ = {"surface": "locked", "side_effecting": False, "reversible": True}


def openai_call(name: str, arguments: str) -> dict:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


def calls(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "attempt"]


async def test_malformed_openai_arguments_come_back_as_a_tool_message(
    reference_servers: Path, db_path: Path
):
    """C44: `arguments` = "{bad json", "[1,2]", "" give a tool message saying the arguments
    are not a JSON object; no exception; nothing is sent. Chat Completions and Responses."""
    config = KitConfig(
        servers={
            "everything": everything(
                reference_servers, envelope=LOCKED_READ, tools={"echo": ToolConfig()}
            ),
            "tickets": ours_stdio(
                db_path, envelope=LOCKED_READ, tools={"get_ticket_status_v2": ToolConfig()}
            ),
        }
    )
    events: list[dict] = []
    async with Kit(config, audit=events.append) as kit:
        block = await kit.tool_block()
        for name in ("everything__echo", "tickets__get_ticket_status_v2"):
            for raw, said in (
                ("{bad json", "not valid JSON"),
                ("[1,2]", "not a JSON object (got list)"),
                ("", "not valid JSON"),
                ("42", "not a JSON object (got int)"),
            ):
                answer = await block.dispatch("openai", openai_call(name, raw))
                assert answer["role"] == "tool" and answer["tool_call_id"] == "call_1"
                assert answer["content"].startswith("Error: invalid arguments for ")
                assert said in answer["content"] and "JSON object" in answer["content"]
                item = {"type": "function_call", "call_id": "fc_9", "name": name, "arguments": raw}
                answer = await block.dispatch("openai-responses", item)
                assert answer["type"] == "function_call_output" and answer["call_id"] == "fc_9"
                assert said in answer["output"]
        answer = await block.dispatch(
            "openai", openai_call("everything__echo", '{"message": "hi"}')
        )
        assert "Echo: hi" in answer["content"]
    assert [c["tool"] for c in calls(events)] == ["echo"], "a malformed call reached a server"


# (schema source, tool, arguments, JSON Schema's verdict is checked against the kit's)
CASES = [
    ("plain", "pair", {"a": 5, "b": True}),
    ("plain", "pair", {"a": "5", "b": "true"}),  # C45
    ("plain", "pair", {"a": 5.0, "b": False}),  # an integer by JSON Schema
    ("plain", "pair", {"a": 5.5, "b": False}),
    ("plain", "pair", {"a": True, "b": False}),
    ("plain", "pair", {"a": 5, "b": 1}),
    ("plain", "pair", {"a": 5, "b": "true"}),
    ("plain", "pair", {"a": 5}),
    ("plain", "pair", {"a": 5, "b": True, "c": 1}),
    ("plain", "pair", {"a": None, "b": True}),
    ("plain", "nested", {"inner": {"x": 1}}),
    ("plain", "nested", {"inner": {"x": 1, "y": 2}}),  # extra key in a closed nested object
    ("plain", "nested", {"inner": {"x": "1"}}),
    ("plain", "nested", {"inner": []}),
    ("everything", "get-sum", {"a": 1, "b": 2.5}),
    ("everything", "get-sum", {"a": "1", "b": 2}),
    ("everything", "get-sum", {"a": True, "b": 2}),
    ("everything", "get-sum", {"a": 1}),
    ("everything", "get-sum", {"a": 1, "b": 2, "c": 3}),  # not closed: allowed
    ("everything", "echo", {"message": "x"}),
    ("everything", "echo", {"message": 1}),
    ("everything", "get-structured-content", {"location": "Chicago"}),
    ("everything", "get-structured-content", {"location": "Paris"}),
    ("tickets", "search_tickets_v2", {"query": "invoice", "limit": 5}),
    ("tickets", "search_tickets_v2", {"query": "invoice", "limit": "5"}),
    ("tickets", "search_tickets_v2", {"query": "invoice", "limit": 3.0}),
    ("tickets", "search_tickets_v2", {"query": "invoice", "limit": 3.5}),
]


async def test_the_verdict_on_arguments_is_json_schemas_and_valid_arguments_go_as_given(
    reference_servers: Path, db_path: Path
):
    """C45: against a tool taking {"a": integer, "b": boolean}, {"a": "5", "b": "true"} is
    refused before anything is sent, with JSON Schema's verdict; the same for 27 cases
    over three servers' schemas; valid arguments are sent exactly as given."""
    servers = [
        ServerConfig(
            name="plain",
            transport="stdio",
            command=kit_server("plain"),
            envelope=LOCKED_READ,
            tools={"pair": ToolConfig(), "nested": ToolConfig()},
        ),
        everything(
            reference_servers,
            envelope=LOCKED_READ,
            tools={
                "get-sum": ToolConfig(),
                "echo": ToolConfig(),
                "get-structured-content": ToolConfig(),
            },
        ),
        ours_stdio(db_path, envelope=LOCKED_READ, tools={"search_tickets_v2": ToolConfig()}),
    ]
    events: list[dict] = []
    async with Kit(KitConfig(servers={s.name: s for s in servers}), audit=events.append) as kit:
        disagreements = []
        for server, tool, arguments in CASES:
            definition = await kit.definition(server, tool)
            valid = jsonschema.validators.validator_for(definition.input_schema)(
                definition.input_schema
            ).is_valid(arguments)
            sent_before = len(calls(events))
            try:
                result = await kit.call(server, tool, arguments)
                kit_valid = True
            except InvalidArguments:
                kit_valid = False
            if kit_valid != valid:
                disagreements.append((server, tool, arguments, valid))
            assert len(calls(events)) == sent_before + (1 if kit_valid else 0)
            if (server, tool, arguments) == ("plain", "pair", {"a": 5.0, "b": False}):
                assert "".join(b.text for b in result.content) == "5 False"
        assert disagreements == []

        with pytest.raises(InvalidArguments) as caught:
            await kit.call("plain", "pair", {"a": "5", "b": "true"})
        assert str(caught.value) == (
            "invalid arguments for plain.pair: a: '5' is not of type 'integer'; "
            "b: 'true' is not of type 'boolean'"
        )
        with pytest.raises(InvalidArguments, match=r"inner\.y: not an argument of this tool"):
            await kit.call("plain", "nested", {"inner": {"x": 1, "y": 2}})
    assert json.dumps(CASES)  # the table itself is plain JSON
    assert len(CASES) == 27
