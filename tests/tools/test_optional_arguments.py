"""Optional arguments a strict client must send anyway (ticket_server/tools/arguments.py):
null and blank text mean "not given", and every published schema says so portably."""

from __future__ import annotations

import json
from typing import Any

from fastmcp import Client

from tests.admin.test_export import export
from tests.helpers import text_of

STATUSES = ["new", "open", "in_progress", "waiting_on_customer", "resolved", "closed"]
FILTERS = ("status", "queue", "owner", "updated_after", "cursor")


def allows_null(schema: dict[str, Any]) -> bool:
    kinds = [v.get("type") for v in schema.get("anyOf", [schema])]
    return "null" in kinds or any(isinstance(k, list) and "null" in k for k in kinds)


async def ids(client: Client, arguments: dict[str, Any]) -> list[str]:
    result = await client.call_tool("search_tickets_v2", arguments, raise_on_error=False)
    assert result.is_error is False, text_of(result)
    return [t["id"] for t in result.structured_content["tickets"]]


async def test_strict_client_empty_and_null_filters_mean_any(client: Client) -> None:
    """C22: a strict client sends every argument; "" and null filters change nothing."""
    alone = await ids(client, {"query": "invoice"})
    assert alone
    empty = {
        "query": "invoice",
        "queue": "",
        "owner": "",
        "status": STATUSES,
        "updated_after": "1970-01-01T00:00:00Z",
        "cursor": "",
        "limit": 10,
    }
    nulls = {"query": "invoice", **dict.fromkeys(FILTERS), "limit": 10}
    assert await ids(client, empty) == alone
    assert await ids(client, nulls) == alone
    blank = {"query": "invoice", "queue": "  ", "owner": " ", "updated_after": "", "status": None}
    assert await ids(client, blank) == alone


async def test_every_optional_argument_can_be_absent(client: Client) -> None:
    """C22: each optional argument of every tool (today's and tomorrow's) either allows
    null or has a default a strict client can send; a null default is not published."""
    for tool in await client.list_tools():
        schema = tool.input_schema
        required = set(schema.get("required", []))
        for name, prop in schema.get("properties", {}).items():
            if name in required:
                continue
            where = f"{tool.name}.{name}"
            assert allows_null(prop) or prop.get("default") is not None, where
            assert "default" not in prop or prop["default"] is not None, where


def gemini_problems(schema: Any, where: str = "$") -> list[str]:
    """What Gemini's parametersJsonSchema refuses: type lists, typeless union variants,
    references and const (Gemini API function-calling reference)."""
    problems: list[str] = []
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), list):
            problems.append(f"{where}: type list")
        for key in ("$ref", "$defs", "definitions", "const", "not", "if", "prefixItems"):
            if key in schema:
                problems.append(f"{where}: {key}")
        for key in ("anyOf", "oneOf"):
            for i, variant in enumerate(schema.get(key, [])):
                if "type" not in variant and "anyOf" not in variant:
                    problems.append(f"{where}.{key}[{i}]: no type")
        for key, value in schema.items():
            if key not in ("enum", "required", "default", "examples"):
                problems += gemini_problems(value, f"{where}.{key}")
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            problems += gemini_problems(item, f"{where}[{i}]")
    return problems


def test_gemini_export_keeps_nullable_filters_portable(db_path) -> None:  # type: ignore[no-untyped-def]
    """C22: the null branches are anyOf variants Gemini accepts, not type lists."""
    done = export(db_path, "--format", "gemini")
    assert done.returncode == 0, done.stderr
    declarations = json.loads(done.stdout)[0]["functionDeclarations"]
    search = next(d for d in declarations if d["name"] == "search_tickets_v2")
    for name in FILTERS:
        assert allows_null(search["parametersJsonSchema"]["properties"][name]), name
    assert [
        p for d in declarations for p in gemini_problems(d["parametersJsonSchema"], d["name"])
    ] == []


async def test_a_wrong_filter_is_still_refused_by_its_own_type(client: Client) -> None:
    """C22: blank means absent; any other text is checked as before, and named in the error."""
    result = await client.call_tool(
        "search_tickets_v2",
        {"query": "invoice", "updated_after": "yesterday"},
        raise_on_error=False,
    )
    assert result.is_error is True
    assert "'updated_after' must be an RFC 3339 date-time string" in text_of(result)
    assert "or null" in text_of(result)


def null_defaults(schema: Any, where: str) -> list[str]:
    """Where ``schema`` publishes ``"default": null``, at any depth."""
    found: list[str] = []
    if isinstance(schema, dict):
        if "default" in schema and schema["default"] is None:
            found.append(where)
        for key, value in schema.items():
            if key not in ("default", "enum", "const", "examples"):
                found += null_defaults(value, f"{where}.{key}")
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            found += null_defaults(item, f"{where}[{i}]")
    return found


async def test_no_tool_publishes_a_null_default() -> None:
    """Every tool, write tools and nested objects (an attachment's embedded resource)
    included, lists its optional arguments without ``"default": null``: an omitted
    argument is absent anyway, and the bytes are paid on every model request."""
    from ticket_server.admin.contract import contract_server, snapshot

    published = await snapshot(contract_server())
    assert len(published["tools"]) >= 20
    assert [
        where
        for tool in published["tools"] + published.get("app_tools", [])
        for where in null_defaults(tool["inputSchema"], tool["name"])
    ] == []
