"""`ticket-server tools export`: the tool definitions a caller sees, in a model
provider's function-calling envelope, ready to paste into a model call.

The tools are listed the way a client lists them: an in-memory ``fastmcp.Client`` on
``build_server(settings)``, so the server's own middleware decides what is shown:
retired names are hidden, and the caller (the stdio caller of the settings, or
``--caller NAME``) sees only the tools its scopes grant. Each format prints the
value of the provider's ``tools`` request field:

- ``openai``: Chat Completions ``tools``: ``[{"type": "function", "function":
  {"name", "description", "parameters"}}]`` (``strict`` is left unset: strict mode
  demands every property be required, which optional arguments are not).
- ``anthropic``: Messages API ``tools``: ``[{"name", "description", "input_schema"}]``.
- ``gemini``: ``generateContent`` ``tools``: ``[{"functionDeclarations": [{"name",
  "description", "parametersJsonSchema"}]}]`` (``parametersJsonSchema`` takes JSON
  Schema as is; the older ``parameters`` field takes only an OpenAPI subset).
- ``mcp``: the ``tools/list`` result, ``{"tools": [...]}``, as the server sends it.

The size report (on stderr) measures the block as compact JSON, the way SDKs send it,
and estimates tokens as ceil(bytes / 4): the usual rule of thumb for English text with
the BPE tokenizers of these providers. JSON schemas carry much punctuation, so take it
as a +-25 % figure; each provider also wraps tools in framing of its own that is not
counted here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ticket_server.admin import CommandError

if TYPE_CHECKING:  # keep `ticket-server --help` and the parser free of the MCP imports
    import mcp.types as mt

Format = Literal["openai", "anthropic", "gemini", "mcp"]
FORMATS: tuple[str, ...] = ("openai", "anthropic", "gemini", "mcp")
BYTES_PER_TOKEN = 4
ESTIMATE_METHOD = "bytes / 4, the usual rule of thumb for BPE tokenizers; about +-25 % for JSON"


async def list_tools(settings: Any, caller: str | None = None) -> list[mt.Tool]:
    """The tools ``caller`` would see (all tools listed to an anonymous in-process client
    when ``caller`` is None), as MCP ``Tool`` objects, in listing order."""
    from fastmcp import Client

    from ticket_server.server import build_runtime, build_server

    if caller is not None:
        # An in-process client is served as the stdio caller the settings name: the
        # access room's own authorization middleware filters the listing for it.
        from ticket_server.access.identity import IdentityError, check_stdio_identity
        from ticket_server.db import DatabaseSetupError, require_current_schema

        try:
            await require_current_schema(settings)
        except DatabaseSetupError as exc:
            raise CommandError(f"--caller {caller}: {exc}") from exc

        settings = settings.model_copy(update={"stdio_caller": caller, "token": None})
    runtime = build_runtime(settings)
    if caller is not None:
        try:
            await check_stdio_identity(settings, runtime.callers)
        except IdentityError as exc:
            await runtime.stop()
            raise CommandError(f"--caller {caller}: {exc}") from exc
    async with Client(build_server(runtime)) as client:
        return list(await client.list_tools())


def _description(tool: mt.Tool) -> str:
    return tool.description or tool.title or tool.name


def _parameters(tool: mt.Tool) -> dict[str, Any]:
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def envelope(tools: Sequence[mt.Tool], fmt: str) -> Any:
    """The provider's ``tools`` field for ``tools`` (the tools/list result for ``mcp``)."""
    if fmt == "openai":
        return [
            {
                "type": "function",
                "function": {"name": t.name, "description": _description(t), "parameters": _parameters(t)},
            }
            for t in tools
        ]
    if fmt == "anthropic":
        return [{"name": t.name, "description": _description(t), "input_schema": _parameters(t)} for t in tools]
    if fmt == "gemini":
        return [
            {
                "functionDeclarations": [
                    {"name": t.name, "description": _description(t), "parametersJsonSchema": _parameters(t)}
                    for t in tools
                ]
            }
        ]
    if fmt == "mcp":
        return {"tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]}
    raise CommandError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def measure(block: Any) -> tuple[int, int]:
    """(bytes of ``block`` as compact UTF-8 JSON, estimated tokens)."""
    size = len(json.dumps(block, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return size, math.ceil(size / BYTES_PER_TOKEN)


def size_line(fmt: str, count: int, block: Any) -> str:
    size, tokens = measure(block)
    return (
        f"tools export: {count} tool(s), {fmt} schema block {size} bytes as compact JSON, "
        f"~{tokens} tokens (estimated as {ESTIMATE_METHOD})"
        + (", sent with every model request" if fmt != "mcp" else ", the tools/list result")
    )
