"""Optional tool arguments that a strict client can leave empty: one convention for every tool.

Strict function calling (OpenAI ``strict: true``; the OpenAI Agents SDK's
``convert_schemas_to_strict``; LangChain's ``bind_tools(strict=True)``) marks every
property required, so the model must send a value even for a filter it does not want.
An optional argument therefore publishes a ``null`` branch (``anyOf: [<type>, {"type":
"null"}]``, a form OpenAI strict mode, Anthropic and Gemini's ``parametersJsonSchema``
all accept), and the server treats ``null``, and empty or blank text, as "not given".

Use ``Omittable[T]`` (default ``None``) for every optional argument without a natural
"everything" value; bounds go on ``T``, not on the union, or they would apply to null::

    queue: Annotated[Omittable[Name], Field(description="e.g. billing")] = None

``tools/declare.py`` passes every tool through :func:`drop_null_defaults`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastmcp.tools import Tool
from pydantic import AfterValidator, AwareDatetime, Field, StringConstraints

from ticket_server.tools.errors import utc_representable

T = TypeVar("T")
BLANK = r"^\s*$"

Time = Annotated[AwareDatetime, AfterValidator(utc_representable)]
"""A time a database can compare: within years 1-9999 once moved to UTC."""

# Blank text is matched as its own branch of the union, tried first, rather than mapped
# to None by a before-validator: FastMCP validates JSON arguments in strict mode, and a
# before-validator hands the inner type a Python value (an RFC 3339 string would then
# no longer be accepted as a datetime).
_Blank = Annotated[str, StringConstraints(pattern=BLANK), AfterValidator(lambda _: None)]


def _unpublish_blank(schema: dict[str, Any]) -> None:
    # Blank text is a courtesy to strict clients, not something to offer a model.
    schema["anyOf"] = [v for v in schema["anyOf"] if v.get("pattern") != BLANK]


if TYPE_CHECKING:  # blank text is validated to None: what the tool receives is T or None
    Omittable = Annotated[T | None, ...]
else:
    Omittable = Annotated[
        _Blank | T | None, Field(union_mode="left_to_right", json_schema_extra=_unpublish_blank)
    ]
"""``T``, or absent: an omitted argument, ``null`` and blank text all arrive as ``None``.
Published as ``anyOf: [<T's schema>, {"type": "null"}]``."""


def drop_null_defaults(tool: Tool) -> Tool:
    """Remove ``"default": null`` from ``tool``'s published input schema, nested objects
    included; returns ``tool``.

    An omitted argument is absent anyway, and every byte of tools/list is paid on each
    model request (strict converters drop a null default themselves). Only the listed
    schema changes: arguments are validated against the function's own types."""

    def drop(schema: Any) -> None:
        if isinstance(schema, list):
            for item in schema:
                drop(item)
        elif isinstance(schema, dict):
            if "default" in schema and schema["default"] is None:
                del schema["default"]
            for key in ("properties", "$defs"):
                for sub in (schema.get(key) or {}).values():
                    drop(sub)
            for key in ("items", "anyOf", "oneOf", "allOf"):
                drop(schema.get(key))

    drop(tool.parameters)
    return tool


def _admits_integer(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    if schema.get("type") == "integer":
        return True
    return any(_admits_integer(s) for s in schema.get("anyOf", ()))


def whole_numbers(arguments: dict[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with each float that has no fraction (``3.0``) given as an int where
    the tool's schema says ``integer``: JSON Schema's ``integer`` admits such a number and
    models send them, while the tools validate strictly. The same dict when none is."""
    changed = {
        name: int(value)
        for name, value in arguments.items()
        if type(value) is float
        and value.is_integer()
        and abs(value) < 2**53
        and _admits_integer(properties.get(name))
    }
    return {**arguments, **changed} if changed else arguments
