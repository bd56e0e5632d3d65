"""Independent clients against the real server processes: the official `mcp` SDK
client, the MCP Inspector CLI, `ticket-server probe`, and the README's client configs.

Everything here is generic over what the server lists: tools are called with
arguments made from their own input schemas, so new tools and resources are covered
the day they are registered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from tests.transports.conftest import (  # noqa: F401  (re-exported fixture)
    TICKET_SERVER,
    http_server,
    server_env,
)

# Arguments the sample database answers without an error, by argument name.
KNOWN_GOOD: dict[str, Any] = {
    "ticket_id": "SUP-4412",
    "query": "invoice",
    "customer_id": "CUS-1042",
}


def example_value(name: str, schema: dict[str, Any]) -> Any:
    """A value for one argument: a known-good sample, else one the schema itself offers."""
    if name in KNOWN_GOOD:
        return KNOWN_GOOD[name]
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []):
            if option.get("type") != "null":
                return example_value(name, option)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "string":
        return "a" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "array":
        items = schema.get("items", {})
        return [example_value(name, items) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "object":
        return example_arguments(schema)
    return None


def example_arguments(input_schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool: every required property, plus any known-good optional one."""
    properties = input_schema.get("properties", {})
    required = set(input_schema.get("required", []))
    return {
        name: example_value(name, schema)
        for name, schema in properties.items()
        if name in required or name in KNOWN_GOOD
    }


def stdio_params(db_path: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=TICKET_SERVER[0], args=[*TICKET_SERVER[1:], "serve"], env=server_env(db_path, **env)
    )


@pytest.fixture
def stdio_server(db_path: Path) -> StdioServerParameters:
    return stdio_params(db_path)
