"""Tool definitions as the kit holds them: one per tool a server lists, with the
envelope the configuration gives it, whether it is pinned (live) and shown to the
model, and an arguments model built from its input schema (FastMCP's JSON Schema to
type conversion) that checks a model's arguments before the call leaves."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ticket_server.client.config import Envelope
from ticket_server.client.session import KitError


class InvalidArguments(KitError):
    """A model's arguments do not fit the tool's input schema; nothing was sent. ``str()``
    names the tool and every problem, for the model to correct its call."""


@dataclass(frozen=True, eq=False)
class ToolDefinition:
    """One listed tool of one server. ``tool`` is the MCP ``Tool`` as listed."""

    server: str
    tool: Any
    envelope: Envelope
    pinned: bool
    visible: bool

    @property
    def name(self) -> str:
        return str(self.tool.name)

    @property
    def description(self) -> str:
        return str(self.tool.description or self.tool.title or self.tool.name)

    @property
    def input_schema(self) -> dict[str, Any]:
        """The input schema as a provider wants it: always an object with ``properties``."""
        schema = dict(self.tool.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema

    @cached_property
    def arguments_model(self) -> TypeAdapter[Any]:
        from fastmcp.utilities.json_schema_type import json_schema_to_type_adapter

        return json_schema_to_type_adapter(self.input_schema)

    def validate(self, arguments: Any) -> dict[str, Any]:
        """``arguments`` unchanged when they fit the input schema, else ``InvalidArguments``."""
        where = f"{self.server}.{self.name}"
        if not isinstance(arguments, dict):
            raise InvalidArguments(
                f"invalid arguments for {where}: expected a JSON object, got {type(arguments).__name__}"
            )
        problems = []
        if self.input_schema.get("additionalProperties") is False:
            known = set(self.input_schema["properties"])
            problems += [
                f"{key}: not an argument of this tool" for key in arguments if key not in known
            ]
        try:
            self.arguments_model.validate_python(arguments)
        except ValidationError as exc:
            problems += [
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors()
            ]
        if problems:
            raise InvalidArguments(f"invalid arguments for {where}: " + "; ".join(problems))
        return arguments
