"""`ticket-server tools export`: the tool definitions in each provider's envelope, as
the CLI prints them; the OpenAI output is checked against the OpenAI tool schema."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest
from fastmcp import Client

from tests.transports.conftest import TICKET_SERVER, add_caller, as_url
from ticket_server.admin.export import measure
from ticket_server.server import build_server
from ticket_server.tools.toolsets import TOOLSETS

NAME = {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}
OBJECT_SCHEMA = {  # a JSON Schema whose instances are argument objects
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"const": "object"}, "properties": {"type": "object"}},
}

# OpenAI Chat Completions `tools` (OpenAPI spec, openai/openai-openapi: ChatCompletionTool,
# FunctionObject, FunctionParameters), closed against stray keys.
OPENAI_TOOLS = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "function"],
        "properties": {
            "type": {"const": "function"},
            "function": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": NAME,
                    "description": {"type": "string"},
                    "parameters": OBJECT_SCHEMA,
                    "strict": {"type": ["boolean", "null"]},
                },
            },
        },
    },
}
# Anthropic Messages API `tools` (custom tools: name, description, input_schema).
ANTHROPIC_TOOLS = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "input_schema"],
        "properties": {
            "name": NAME,
            "description": {"type": "string"},
            "input_schema": OBJECT_SCHEMA,
        },
    },
}
# Gemini generateContent `tools`: Tool objects holding functionDeclarations.
GEMINI_TOOLS = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["functionDeclarations"],
        "properties": {
            "functionDeclarations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name", "description"],
                    "properties": {
                        "name": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$"},
                        "description": {"type": "string"},
                        "parametersJsonSchema": OBJECT_SCHEMA,
                    },
                },
            }
        },
    },
}


def export(db_path: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    env["TICKET_SERVER_DATABASE_URL"] = as_url(db_path)
    env["TICKET_SERVER_TOOLSETS"] = json.dumps(list(TOOLSETS))  # as the in-memory server
    return subprocess.run(
        [*TICKET_SERVER, "tools", "export", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


async def listed(settings) -> dict:  # type: ignore[no-untyped-def]
    async with Client(build_server(settings)) as client:
        return {t.name: t for t in await client.list_tools()}


def check_size_line(stderr: str, fmt: str, block) -> None:  # type: ignore[no-untyped-def]
    size, tokens = measure(block)
    line = stderr.strip().splitlines()[-1]
    assert f"{fmt} schema block {size} bytes as compact JSON" in line, line
    assert f"~{tokens} tokens (estimated as bytes / 4" in line, line
    assert tokens == -(-size // 4)


async def test_openai_export_is_accepted_by_the_openai_tool_schema(db_path: Path, settings) -> None:
    done = export(db_path, "--format", "openai")
    assert done.returncode == 0, done.stderr
    block = json.loads(done.stdout)
    jsonschema.validate(block, OPENAI_TOOLS)
    expected = await listed(settings)
    assert [t["function"]["name"] for t in block] == list(expected)
    for tool in block:
        fn = tool["function"]
        jsonschema.Draft202012Validator.check_schema(fn["parameters"])
        assert fn["parameters"] == expected[fn["name"]].input_schema
        assert fn["description"] == expected[fn["name"]].description
    check_size_line(done.stderr, "openai", block)


@pytest.mark.parametrize(
    ("fmt", "schema", "key"),
    [
        ("anthropic", ANTHROPIC_TOOLS, "input_schema"),
        ("gemini", GEMINI_TOOLS, "parametersJsonSchema"),
    ],
)
async def test_other_provider_envelopes(
    db_path: Path, settings, fmt: str, schema: dict, key: str
) -> None:
    done = export(db_path, "--format", fmt)
    assert done.returncode == 0, done.stderr
    block = json.loads(done.stdout)
    jsonschema.validate(block, schema)
    declarations = block[0]["functionDeclarations"] if fmt == "gemini" else block
    expected = await listed(settings)
    assert {d["name"]: d[key] for d in declarations} == {
        n: t.input_schema for n, t in expected.items()
    }
    check_size_line(done.stderr, fmt, block)


async def test_mcp_export_is_the_tools_list_result(db_path: Path, settings) -> None:
    done = export(db_path, "--format", "mcp")
    assert done.returncode == 0, done.stderr
    block = json.loads(done.stdout)
    expected = await listed(settings)
    assert block == {
        "tools": [
            t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in expected.values()
        ]
    }
    deprecated = {
        t["name"] for t in block["tools"] if t.get("_meta", {}).get("dev.ticket-server/deprecation")
    }
    assert {"get_ticket_status", "search_tickets"} <= deprecated


@pytest.mark.one_engine  # the export reads one caller; the store is tested on both engines
def test_export_for_a_caller(database_url: str) -> None:
    """Both engines: `--caller` reads the caller's scopes from the callers table. (The
    format tests above run on SQLite only: without --caller no table is read.)"""
    add_caller(database_url, "reader", ("tickets:read",))
    add_caller(database_url, "auditor", ("audit:read",))
    everything = json.loads(export(database_url, "--format", "openai").stdout)
    done = export(database_url, "--format", "openai", "--caller", "reader")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == everything
    done = export(database_url, "--format", "openai", "--caller", "auditor")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    assert "0 tool(s)" in done.stderr
    done = export(database_url, "--caller", "nobody")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "nobody" in done.stderr
