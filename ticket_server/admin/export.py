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

The provider shapes and the size report come from the client kit's adapters
(``ticket_server.client.adapters``), the one implementation: the block measured as
compact JSON, the way SDKs send it, and tokens estimated as ceil(bytes / 4), about
+-25 % for JSON; each provider's own framing is not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ticket_server.admin import CommandError
from ticket_server.client.adapters import ESTIMATE_METHOD, measure, tools_field
from ticket_server.client.config import MOST_RESTRICTIVE
from ticket_server.client.tools import ToolDefinition

if TYPE_CHECKING:
    import mcp.types as mt

Format = Literal["openai", "anthropic", "gemini", "mcp"]
FORMATS: tuple[str, ...] = ("openai", "anthropic", "gemini", "mcp")
__all__ = [
    "ESTIMATE_METHOD",
    "FORMATS",
    "check_format",
    "envelope",
    "list_tools",
    "measure",
    "size_line",
]


async def list_tools(settings: Any, caller: str | None = None) -> list[mt.Tool]:
    """The tools ``caller`` would see (without ``caller``: the stdio caller the settings
    name, the built-in ``local`` by default), as MCP ``Tool`` objects, in listing order.
    ``CommandError`` in one line when the database or the caller cannot be read."""
    from fastmcp import Client

    from ticket_server.access.callers import RegistryUnavailable
    from ticket_server.access.identity import IdentityError, check_stdio_identity
    from ticket_server.db import DatabaseSetupError, require_current_schema
    from ticket_server.server import build_runtime, build_server

    command = "tools export" + (f" --caller {caller}" if caller is not None else "")
    try:
        await require_current_schema(settings)
    except DatabaseSetupError as exc:
        raise CommandError(f"{command}: {exc}") from exc
    if caller is not None:
        # An in-process client is served as the stdio caller the settings name: the
        # access room's own authorization middleware filters the listing for it.
        settings = settings.model_copy(update={"stdio_caller": caller, "token": None})
    runtime = build_runtime(settings)
    try:
        await check_stdio_identity(settings, runtime.callers)
    except IdentityError as exc:
        await runtime.stop()
        # The check names the setting it reads; with --caller the name came from the
        # command line, so apart from an unreadable callers table the one failure is an
        # unknown name.
        reason = (
            str(exc)
            if caller is None or isinstance(exc.__cause__, RegistryUnavailable)
            else f"no caller named {caller!r} (or it is revoked); pick a name from "
            "`ticket-server callers list`, or add it with `ticket-server callers add`"
        )
        raise CommandError(f"{command}: {reason}") from exc
    async with Client(build_server(runtime)) as client:
        return list(await client.list_tools())


def check_format(fmt: str) -> None:
    """``CommandError`` unless ``fmt`` is one of ``FORMATS``."""
    if fmt not in FORMATS:
        raise CommandError(
            f"tools export: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}"
        )


def envelope(tools: Sequence[mt.Tool], fmt: str) -> Any:
    """The provider's ``tools`` field for ``tools`` (the tools/list result for ``mcp``),
    made by the client kit's adapters under each tool's own name (one server: no
    namespace)."""
    check_format(fmt)
    if fmt == "mcp":
        return {
            "tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]
        }
    definitions = [
        (
            t.name,
            ToolDefinition(
                server="ticket-server", tool=t, envelope=MOST_RESTRICTIVE, pinned=True, visible=True
            ),
        )
        for t in tools
    ]
    return tools_field(definitions, fmt)


def size_line(fmt: str, count: int, block: Any) -> str:
    size, tokens = measure(block)
    return (
        f"tools export: {count} tool(s), {fmt} schema block {size} bytes as compact JSON, "
        f"~{tokens} tokens (estimated as {ESTIMATE_METHOD})"
        + (", sent with every model request" if fmt != "mcp" else ", the tools/list result")
    )
