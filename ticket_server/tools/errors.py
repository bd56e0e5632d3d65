"""Turning failures into tool results a model can act on.

A failure the model can fix is a tool result with ``isError: true`` and a sentence
written for it (MCP spec, "Error Handling": tool execution errors are reported in the
result, protocol errors as JSON-RPC errors). Internal detail stays in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastmcp.exceptions import ToolError
from pydantic import ValidationError as PydanticValidationError

from ticket_server.tickets.domain import DatabaseUnavailable

DATABASE_UNAVAILABLE = (
    "The ticket database is unavailable right now; nothing was changed. Try again in a few seconds."
)


class UnavailableError(ToolError):
    """A database the call needs did not answer: the model reads ``DATABASE_UNAVAILABLE``;
    the call pipeline records the cause from the type."""

    def __init__(self) -> None:
        super().__init__(DATABASE_UNAVAILABLE)


def model_error(message: str) -> ToolError:
    """A ``ToolError`` the model can fix by itself (unknown id, invalid argument, stale
    cursor): FastMCP logs it at INFO, not ERROR. ERROR is kept for what an operator
    must look at (the database unavailable, a bug): a plain ``ToolError`` or any other
    exception."""
    return ToolError(message, log_level=logging.INFO)


@contextmanager
def domain_errors() -> Iterator[None]:
    """Map domain exceptions raised inside a tool to model-readable tool errors."""
    try:
        yield
    except DatabaseUnavailable as exc:
        raise UnavailableError() from exc


def _expectation(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> str:
    """'an integer from 1 to 50', 'a string of at most 500 characters', ... from JSON Schema
    (local ``#/$defs/...`` references resolved through ``defs``)."""
    defs = defs or {}
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        schema = {**defs.get(ref.removeprefix("#/$defs/"), {}), **{k: v for k, v in schema.items() if k != "$ref"}}
    if "anyOf" in schema:
        parts = [_expectation(s, defs) for s in schema["anyOf"]]
        return " or ".join(dict.fromkeys(parts))
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return "null"
    if kind == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is not None and hi is not None:
            return f"an integer from {lo} to {hi}"
        return "an integer" + (f" >= {lo}" if lo is not None else "") + (f" <= {hi}" if hi is not None else "")
    if kind == "string":
        text = "a string"
        if schema.get("format") == "date-time":
            text = "an RFC 3339 date-time string such as 2026-07-14T00:00:00Z"
        if "maxLength" in schema:
            text += f" of at most {schema['maxLength']} characters"
        return text
    if kind == "array":
        items = schema.get("items", {})
        return f"a list of {_expectation(items, defs)}" if items else "a list"
    return {"boolean": "true or false", "number": "a number", "object": "an object"}.get(
        str(kind), "a valid value"
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_invalid_arguments(
    tool: str, error: PydanticValidationError, input_schema: dict[str, Any]
) -> str:
    """One model-readable sentence per invalid argument, naming the bound or type expected."""
    properties: dict[str, Any] = input_schema.get("properties", {})
    defs: dict[str, Any] = input_schema.get("$defs", {})
    problems: list[str] = []
    for err in error.errors(include_url=False):
        loc = err.get("loc") or ()
        name = str(loc[0]) if loc else "arguments"
        schema = properties.get(name, {})
        if err["type"] in ("missing", "missing_argument"):
            problems.append(f"'{name}' is required ({_expectation(schema, defs)})")
        elif err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            known = ", ".join(properties) or "none"
            problems.append(f"{_shown(name)} is not an argument of this tool (arguments: {known})")
        elif name in properties:
            problems.append(f"'{name}' must be {_expectation(schema, defs)} (got {_shown(err.get('input'))})")
        else:
            problems.append(f"the arguments must be an object with: {', '.join(properties)}")
    unique = list(dict.fromkeys(problems))
    if len(unique) > MAX_PROBLEMS:
        unique = [*unique[:MAX_PROBLEMS], f"and {len(unique) - MAX_PROBLEMS} more"]
    return f"Invalid arguments for {tool}: " + "; ".join(unique) + ". Nothing was done."


MAX_PROBLEMS = 8
"""At most this many problems are named in one message (an object of a thousand
unknown keys is answered with a sentence, not a dump)."""
MAX_DEPTH = 32
"""Deepest nesting of lists and objects accepted in any argument."""


def _lone_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _unusable(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` cannot be taken as an argument at all, or None.

    JSON may carry lone UTF-16 surrogates (``"\\ud800"``) and any nesting; no tool
    can use either (the database drivers refuse such text, validation recurses)."""
    if depth > MAX_DEPTH:
        return f"is nested more than {MAX_DEPTH} levels deep"
    if isinstance(value, str):
        return "contains a lone UTF-16 surrogate (not valid Unicode text)" if _lone_surrogate(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _lone_surrogate(key):
                return "has a key that contains a lone UTF-16 surrogate (not valid Unicode text)"
            reason = _unusable(item, depth + 1)
            if reason:
                return reason
    elif isinstance(value, list):
        for item in value:
            reason = _unusable(item, depth + 1)
            if reason:
                return reason
    return None


def describe_unusable_arguments(tool: str, arguments: dict[str, Any]) -> str | None:
    """A sentence naming each argument no tool could use, or None when all are usable."""
    problems = []
    for name, value in arguments.items():
        reason = _unusable(value)
        if reason is not None or _lone_surrogate(str(name)):
            problems.append(f"{_shown(name)} {reason or 'is not valid Unicode text'}")
    if not problems:
        return None
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"and {len(problems) - MAX_PROBLEMS} more"]
    return f"Invalid arguments for {tool}: " + "; ".join(problems) + ". Nothing was done."
