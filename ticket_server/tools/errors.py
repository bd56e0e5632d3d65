"""Turning failures into tool results a model can act on.

A failure the model can fix is a tool result with ``isError: true`` and a sentence
written for it (MCP spec, "Error Handling": tool execution errors are reported in the
result, protocol errors as JSON-RPC errors). Internal detail stays in the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from fastmcp.exceptions import ToolError
from pydantic import ValidationError as PydanticValidationError

from ticket_server.tickets.domain import DatabaseUnavailable, SearchTooCostly

DATABASE_UNAVAILABLE = (
    "The ticket database is unavailable right now; nothing was changed. Try again in a few seconds."
)


class UnavailableError(ToolError):
    """A database the call needs did not answer: the model reads ``DATABASE_UNAVAILABLE``;
    the call pipeline records the cause from the type."""

    def __init__(self) -> None:
        super().__init__(DATABASE_UNAVAILABLE)


MAX_NAME_SHOWN = 80


def shown(name: str) -> str:
    """A tool or prompt name as quoted back to the client: repr (escapes control
    characters and lone surrogates), at most 80 characters (a client may send a megabyte
    of name)."""
    text = repr(name)
    return text if len(text) <= MAX_NAME_SHOWN else text[: MAX_NAME_SHOWN - 3] + "..."


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
    except SearchTooCostly as exc:
        raise ToolError(
            "The search took too long and was stopped; nothing was changed. Use a longer, more "
            "specific query, or search_tickets_v2."
        ) from exc


def _expectation(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> str:
    """'an integer from 1 to 50', 'a string of at most 500 characters', ... from JSON Schema
    (local ``#/$defs/...`` references resolved through ``defs``)."""
    defs = defs or {}
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        schema = {
            **defs.get(ref.removeprefix("#/$defs/"), {}),
            **{k: v for k, v in schema.items() if k != "$ref"},
        }
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
        return (
            "an integer"
            + (f" >= {lo}" if lo is not None else "")
            + (f" <= {hi}" if hi is not None else "")
        )
    if kind == "string":
        text = "a string"
        if schema.get("format") == "date-time":
            text = "an RFC 3339 date-time string such as 2026-07-14T00:00:00Z"
        if "maxLength" in schema:
            text += f" of at most {schema['maxLength']} characters"
        return text
    if kind == "array":
        items = schema.get("items", {})
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        count = (  # named, or a list of the wrong length is told what it already is
            f"{lo} to {hi} items"
            if lo is not None and hi is not None
            else f"at most {hi} items"
            if hi is not None
            else f"at least {lo} item{'s' if lo != 1 else ''}"
            if lo is not None
            else None
        )
        each = _expectation(items, defs) if items else None
        if count is None:
            return f"a list of {each}" if each else "a list"
        return f"a list of {count}, each {each}" if each else f"a list of {count}"
    return {"boolean": "true or false", "number": "a number", "object": "an object"}.get(
        str(kind), "a valid value"
    )


def utc_representable(moment: datetime) -> datetime:
    """``moment`` if it is a time the database can store (within years 1-9999 once in
    UTC), else ``ValueError``: ``0001-01-01T00:00:00+14:00`` is a valid RFC 3339 string
    but falls before year 1 in UTC. Use as a pydantic ``AfterValidator``."""
    try:
        moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("outside years 1-9999 in UTC") from exc
    return moment


def too_long(tool: str, argument: str, value: str, limit: int) -> ToolError | None:
    """A ``ToolError`` naming the bound when ``value`` is longer than ``limit`` characters."""
    if len(value) <= limit:
        return None
    return ToolError(
        f"Invalid arguments for {tool}: '{argument}' must be a string of at most {limit} "
        f"characters (got {len(value)}). Nothing was done."
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_invalid_arguments(
    tool: str, error: PydanticValidationError, input_schema: dict[str, Any]
) -> str:
    """One model-readable sentence per invalid argument, naming the bound or type expected,
    or the field within it (``attachments[0].name``) when the problem lies inside."""
    properties: dict[str, Any] = input_schema.get("properties", {})
    defs: dict[str, Any] = input_schema.get("$defs", {})
    by_argument: dict[str, list[Any]] = {}
    for err in error.errors(include_url=False):
        loc = err.get("loc") or ()
        by_argument.setdefault(str(loc[0]) if loc else "", []).append(err)
    problems = [_problem(name, errs, properties, defs) for name, errs in by_argument.items()]
    unique = list(dict.fromkeys(problems))
    if len(unique) > MAX_PROBLEMS:
        unique = [*unique[:MAX_PROBLEMS], f"and {len(unique) - MAX_PROBLEMS} more"]
    return f"Invalid arguments for {tool}: " + "; ".join(unique) + ". Nothing was done."


def _problem(name: str, errs: list[Any], properties: dict[str, Any], defs: dict[str, Any]) -> str:
    """The sentence for argument ``name``'s errors (one per branch of a union it may be)."""
    if any(e["type"] in ("extra_forbidden", "unexpected_keyword_argument") for e in errs):
        return f"{_shown(name)} is not an argument of this tool (arguments: {', '.join(properties) or 'none'})"
    if name not in properties:
        return f"the arguments must be an object with: {', '.join(properties)}"
    schema = properties[name]
    if any(e["type"] in ("missing", "missing_argument") and len(e["loc"]) == 1 for e in errs):
        return f"'{name}' is required ({_expectation(schema, defs)})"
    # The branch the value came nearest to: the one whose error lies deepest in it, and
    # of those as deep, one about a field it sent (a missing field is another branch's).
    err = max(errs, key=lambda e: (len(_path(e["loc"], schema, defs)), e["type"] != "missing"))
    path = _path(err["loc"], schema, defs)
    if not any(isinstance(part, str) for part in path):  # the argument, or an item of it
        return f"'{name}' must be {_expectation(schema, defs)} (got {_shown(err.get('input'))})"
    where = name + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    if err["type"] == "missing":
        return f"'{where}' is required"
    return f"'{where}': {err['msg']} (got {_shown(err.get('input'))})"


def _path(loc: tuple[Any, ...], schema: dict[str, Any], defs: dict[str, Any]) -> list[Any]:
    """The indices and field names of ``loc`` below its argument, without the tags pydantic
    adds for a union's branches (``list[...]``, a model's name), by ``schema``'s shape."""
    path: list[Any] = []
    for part in loc[1:]:
        schema = _resolved(schema, defs)
        if isinstance(part, int):
            items = [s for s in [schema, *schema.get("anyOf", [])] if "items" in s]
            schema = items[0]["items"] if items else {}
            path.append(part)
            continue
        fields = [s for s in [schema, *schema.get("anyOf", [])] if part in s.get("properties", {})]
        if fields:
            schema = fields[0]["properties"][part]
            path.append(part)
    return path


def _resolved(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        found: dict[str, Any] = defs.get(ref.removeprefix("#/$defs/"), {})
        return found
    if "anyOf" in schema:
        return {**schema, "anyOf": [_resolved(s, defs) for s in schema["anyOf"]]}
    return schema


MAX_PROBLEMS = 8
"""At most this many problems are named in one message (an object of a thousand
unknown keys is answered with a sentence, not a dump)."""
MAX_DEPTH = 32
"""Deepest nesting of lists and objects accepted in any argument."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(text: str) -> bool:
    # ASCII (known without a scan) holds none; else one C-speed search, not a Python loop
    # per character (seconds over a 10 MB attachment's base64: bench/ANALYSIS.md).
    return not text.isascii() and _SURROGATE.search(text) is not None


CONTROL_CHARACTERS = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
"""Characters no argument takes (a regular expression class): NUL, the other C0 controls
but tab, line feed and carriage return, DEL and the C1 controls. PostgreSQL's text
refuses NUL (SQLite would store it), and the others reach a terminal as escape sequences."""
_CONTROL = re.compile(CONTROL_CHARACTERS)


def _control(text: str) -> str | None:
    found = _CONTROL.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "holds a NUL character (U+0000), which no text takes"
    return f"holds the control character U+{ord(found.group()):04X}, which no text takes"


def _unusable(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` cannot be taken as an argument at all, or None.

    JSON may carry lone UTF-16 surrogates (``"\\ud800"``) and any nesting; no tool
    can use either (the database drivers refuse such text, validation recurses)."""
    if depth > MAX_DEPTH:
        return f"is nested more than {MAX_DEPTH} levels deep"
    if isinstance(value, str):
        return (
            "contains a lone UTF-16 surrogate (not valid Unicode text)"
            if _lone_surrogate(value)
            else _control(value)
        )
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


MAX_ARGUMENT_VALUES = 1_000
"""Most values (strings, numbers, list items, object members, at every depth) one call's
arguments may hold; far above what any tool takes (a search sends under twenty)."""
MAX_ARGUMENT_CHARS = 65_536
"""Most characters of text (keys and strings together) one call's arguments may hold."""
FILE_CONTENT_KEYS = frozenset({"content_base64", "blob"})
"""Members holding an attachment's bytes (base64): not counted in ``MAX_ARGUMENT_CHARS``;
``Settings.attachment_max_bytes`` bounds them (``tools.attachments``)."""


def describe_refused_arguments(
    tool: str,
    arguments: dict[str, Any],
    known: Iterable[str],
    *,
    sent: int | None = None,
) -> str | None:
    """A sentence when ``arguments`` has a key the tool does not take or is larger than
    any tool takes (``MAX_ARGUMENT_VALUES``, ``MAX_ARGUMENT_CHARS``), else None.
    ``sent``: how many keys the client sent, when ``arguments`` holds only the first.

    Cost is bounded whatever was sent: it stops at the first bound passed, so a call of a
    few hundred thousand keys is refused without a pass over all of them."""
    names = dict.fromkeys(known)
    count = max(sent or 0, len(arguments))
    if count > len(names) or not names.keys() >= arguments.keys():
        unknown = list(islice((k for k in arguments if k not in names), MAX_PROBLEMS))
        more = count - len(names) - len(unknown) if count > len(names) else 0
        listed = ", ".join(_shown(k) for k in unknown) + (f" and {more} more" if more > 0 else "")
        return (
            f"Invalid arguments for {tool}: {listed} {'is' if len(unknown) == 1 and more <= 0 else 'are'} "
            f"not an argument of this tool (arguments: {', '.join(names) or 'none'}). Nothing was done."
        )
    values, chars = 0, 0
    stack: list[Any] = list(arguments.items())
    while stack:
        item = stack.pop()
        values += 1
        if values > MAX_ARGUMENT_VALUES:
            return (
                f"Invalid arguments for {tool}: more than {MAX_ARGUMENT_VALUES} values in all. "
                "Nothing was done."
            )
        if isinstance(item, tuple):  # an object member: its key, then its value
            chars += len(item[0]) if isinstance(item[0], str) else 0
            if item[0] in FILE_CONTENT_KEYS and isinstance(item[1], str):
                values += 1  # a file's bytes: bounded by the attachment limits instead
                continue
            stack.append(item[1])
        elif isinstance(item, str):
            chars += len(item)
        elif isinstance(item, dict):
            stack.extend(islice(item.items(), MAX_ARGUMENT_VALUES + 1))
        elif isinstance(item, list):
            stack.extend(item[: MAX_ARGUMENT_VALUES + 1])
        if chars > MAX_ARGUMENT_CHARS:
            return (
                f"Invalid arguments for {tool}: more than {MAX_ARGUMENT_CHARS} characters of text "
                "in all. Nothing was done."
            )
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
