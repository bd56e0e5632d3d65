"""How a tool is declared: one ``Tool`` per function, built at import, with the
annotations, scope tag and output schema of its kind (``tools/services.py`` says how its
function reaches the server it serves)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastmcp.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel

from ticket_server.access.policy import READ_SCOPE, WRITE_SCOPE
from ticket_server.compat import dereference_refs
from ticket_server.tools import READ_ONLY
from ticket_server.tools.arguments import drop_null_defaults
from ticket_server.tools.outputs import output_schema


def _published(tool: Tool) -> Tool:
    """``tool`` as it is listed: the ``$ref``s of its input and output schemas inlined,
    by FastMCP's own function (``compat.dereference_refs``), once per process (what its
    ``dereference_schemas``, off in ``build_server``, would redo on every tools/list), and
    no ``"default": null`` in its input schema (``arguments.drop_null_defaults``)."""
    drop_null_defaults(tool)
    update = {
        field: dereference_refs(schema)
        for field in ("parameters", "output_schema")
        if (schema := getattr(tool, field)) is not None
        and ("$defs" in schema or '"$ref"' in json.dumps(schema))
    }
    return tool.model_copy(update=update) if update else tool


def read_tool(
    fn: Callable[..., Any],
    output: type[BaseModel] | None = None,
    *,
    meta: dict[str, Any] | None = None,
) -> Tool:
    """A read tool named as ``fn``: read-only annotations, the ``tickets:read`` scope, the
    published shape of ``output`` as its output schema (None: FastMCP's, from the return
    type)."""
    tool = Tool.from_function(
        fn,
        name=fn.__name__,
        annotations=READ_ONLY,
        tags={READ_SCOPE},
        meta=meta,
        output_schema=output_schema(output) if output is not None else ...,  # ...: FastMCP's
    )
    return _published(tool)


def write_tool(
    fn: Callable[..., Any], annotations: ToolAnnotations, output: type[BaseModel]
) -> Tool:
    """A write tool named as ``fn``: ``annotations``, the ``tickets:write`` scope, and
    ``output``'s JSON Schema as its output schema."""
    return _published(
        Tool.from_function(
            fn,
            name=fn.__name__,
            annotations=annotations,
            tags={WRITE_SCOPE},
            output_schema=output.model_json_schema(),
        )
    )
