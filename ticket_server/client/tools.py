"""Tool definitions as the kit holds them: one per tool a server lists, with the
envelope the configuration gives it, whether it is pinned (live) and shown to the
model, and a JSON Schema validator of its input schema (the ``jsonschema`` library,
the draft the schema names, 2020-12 by default) that checks a model's arguments before
the call leaves: the verdict is JSON Schema's, and the arguments are sent as given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import jsonschema.validators

from ticket_server.client.config import Envelope
from ticket_server.client.session import KitError


class InvalidArguments(KitError):
    """A model's arguments do not fit the tool's input schema; nothing was sent. ``str()``
    names the tool and every problem, for the model to correct its call."""


def schema_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A validator for ``schema`` in the draft it names (2020-12 when it names none)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def problems(validator: jsonschema.protocols.Validator, instance: Any) -> list[str]:
    """Every way ``instance`` fails ``validator``'s schema, one short line each, in the
    words a model can act on: ``path: what is wrong``."""
    found = []
    # Unknown keys first, then what is missing, then wrong values: the order a model fixes them.
    rank = {"additionalProperties": 0, "required": 1}
    errors = validator.iter_errors(instance)
    for error in sorted(
        errors, key=lambda e: (len(e.absolute_path), rank.get(str(e.validator), 2))
    ):
        found.extend(_describe(error))
    return found


def _describe(error: jsonschema.exceptions.ValidationError) -> list[str]:
    path = ".".join(str(p) for p in error.absolute_path)
    at = f"{path}." if path else ""
    instance, schema = error.instance, error.schema
    if error.validator == "required" and isinstance(instance, dict):
        wanted = error.validator_value if isinstance(error.validator_value, list) else []
        return [f"{at}{key}: Field required" for key in wanted if key not in instance]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        known = set(schema.get("properties", {})) if isinstance(schema, Mapping) else set()
        return [f"{at}{key}: not an argument of this tool" for key in instance if key not in known]
    message = error.message if len(error.message) <= 200 else error.message[:197] + "..."
    return [f"{path or '(arguments)'}: {message}"]


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
        name: str = self.tool.name
        return name

    @property
    def description(self) -> str:
        text: str = self.tool.description or self.tool.title or self.tool.name
        return text

    @property
    def input_schema(self) -> dict[str, Any]:
        """The input schema as a provider wants it: always an object with ``properties``."""
        schema = dict(self.tool.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema

    @cached_property
    def validator(self) -> jsonschema.protocols.Validator:
        return schema_validator(self.input_schema)

    def validate(self, arguments: Any) -> dict[str, Any]:
        """``arguments`` unchanged when JSON Schema finds them valid for the input schema,
        else ``InvalidArguments`` naming every problem."""
        where = f"{self.server}.{self.name}"
        if not isinstance(arguments, dict):
            raise InvalidArguments(
                f"invalid arguments for {where}: expected a JSON object, got {type(arguments).__name__}"
            )
        found = problems(self.validator, arguments)
        if found:
            raise InvalidArguments(f"invalid arguments for {where}: " + "; ".join(found))
        return arguments
