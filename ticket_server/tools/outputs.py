"""Output schemas as published: the shape of a result, without prose.

Every tools/list carries each tool's output schema, and what a result's fields mean is
said once, in the tool's description. The published output schema therefore keeps what
a client checks a result against (types, enums, formats, ``required``) and leaves out:
``description`` (pydantic copies an enum's class docstring into every field of that
type), ``title`` and ``"default": null`` (a result has no defaults).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_PROSE = ("description", "title")
# Keywords whose value maps names to schemas (the names are data, not keywords).
_NAMED_SCHEMAS = ("properties", "$defs", "definitions", "patternProperties")
# Keywords whose value is a schema or a list of schemas.
_SUBSCHEMAS = ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "prefixItems")


def _shape(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_shape(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _PROSE or (key == "default" and value is None):
            continue
        if key in _NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _shape(s) for name, s in value.items()}
        elif key in _SUBSCHEMAS:
            out[key] = _shape(value)
        else:
            out[key] = value
    return out


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON Schema (serialization mode, as results are dumped) as published."""
    schema: dict[str, Any] = _shape(model.model_json_schema(mode="serialization"))
    return schema
