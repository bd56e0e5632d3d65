"""The stdio transport, answering malformed frames as JSON-RPC 2.0 requires.

The SDK's stdio reader drops a line it cannot parse without a word, so a client that
sent one waits for an answer that never comes. JSON-RPC 2.0 (section 5.1) names the
answer: invalid JSON is a Parse error (-32700), valid JSON that is not a request,
notification or response (a batch, a wrong ``jsonrpc``, an id of the wrong type) is an
Invalid Request (-32600); both with ``"id": null``, since no id could be read. Blank
lines are skipped. Everything else is FastMCP's ``run_stdio_async`` unchanged.
"""

from __future__ import annotations

import logging

import anyio
from fastmcp import FastMCP
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

log = logging.getLogger(__name__)


def frame_error(exc: Exception) -> ErrorData | None:
    """The JSON-RPC error for a line the transport could not read; None to skip it."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        raw = errors[0].get("input") if errors else None
        if isinstance(raw, (str, bytes)) and not raw.strip():
            return None  # a blank line: nothing was sent
        if any(e.get("type") == "json_invalid" for e in errors):
            return ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON")
    return ErrorData(
        code=INVALID_REQUEST,
        message="Invalid Request: expected a JSON-RPC 2.0 request, notification or response object",
    )


async def run_stdio(mcp: FastMCP) -> None:
    """Serve ``mcp`` over stdin/stdout until stdin ends (like ``run_stdio_async``)."""
    from fastmcp.server.context import reset_transport, set_transport
    from mcp.server.stdio import stdio_server

    token = set_transport("stdio")
    try:
        async with mcp._lifespan_manager(), stdio_server() as (read_stream, write_stream):
            to_server, from_relay = create_context_streams[SessionMessage | Exception](0)

            async def relay() -> None:
                async with to_server:
                    async for item in read_stream:
                        if not isinstance(item, Exception):
                            await to_server.send(item)
                            continue
                        error = frame_error(item)
                        if error is None:
                            continue
                        log.warning("unreadable stdio frame", extra={"code": error.code})
                        await write_stream.send(
                            SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error))
                        )

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                await mcp._mcp_server.run(
                    from_relay, write_stream, mcp._mcp_server.create_initialization_options()
                )
                tg.cancel_scope.cancel()
    finally:
        reset_transport(token)
