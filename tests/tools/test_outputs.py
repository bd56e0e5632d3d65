"""Published output schemas: the shape of a result without prose (tools/outputs.py)."""

from __future__ import annotations

from enum import StrEnum

import jsonschema
from pydantic import BaseModel

from ticket_server.tools.outputs import output_schema


class Colour(StrEnum):
    """A docstring pydantic would copy into every field of this type."""

    RED = "red"


class Inner(BaseModel):
    """Inner."""

    colour: Colour
    title: str  # a field named like a keyword is data, not prose


class Result(BaseModel):
    """Result."""

    description: str
    items: list[Inner]
    note: str | None = None
    limit: int = 10


def test_prose_and_null_defaults_go_names_and_shape_stay() -> None:
    schema = output_schema(Result)
    text = str(schema)
    assert "docstring" not in text and "'title'" in text  # the field `title`, not a schema title
    inner = schema["$defs"]["Inner"]
    assert set(inner) == {"properties", "required", "type"}
    assert set(inner["properties"]) == {"colour", "title"}
    assert schema["properties"]["description"] == {"type": "string"}
    assert "default" not in schema["properties"]["note"]
    assert schema["properties"]["limit"]["default"] == 10
    full = Result.model_json_schema(mode="serialization")
    assert schema["required"] == full["required"]
    value = Result(description="d", items=[Inner(colour=Colour.RED, title="t")]).model_dump(
        mode="json"
    )
    jsonschema.validate(value, schema)
    jsonschema.validate(value, full)
