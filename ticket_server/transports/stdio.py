"""The stdio transport: FastMCP's ``run_stdio_async``, with three additions.

- Malformed frames are answered as JSON-RPC 2.0 requires (``transports.frames``): the
  SDK's stdio reader drops a line it cannot parse without a word, so a client that sent
  one would wait for an answer that never comes. Blank lines are skipped. A line that
  is not UTF-8 is a Parse error (RFC 8259 section 8.1: JSON text is UTF-8), as over
  HTTP: the SDK's reader would replace the bytes with U+FFFD and run the request.
- The start-up checks (the database is at the migration head, the configured stdio caller
  exists unrevoked) run in-process beside the start: ``initialize`` may be answered
  first, tools/list and tools/call wait for them. A failed check ends the process with
  its one-line message and exit status 2.
- Request ids are tracked between stdin and the server (``InFlight``): a request whose
  id a request still unanswered holds is answered -32600 at once (the SDK would run
  both and give one of them the other's answer), and at the end of input the requests
  still running are answered before the server stops, rather than "Connection closed".
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any

import anyio
from fastmcp import FastMCP
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from pydantic import ValidationError

from ticket_server import __version__, compat
from ticket_server.server import Runtime, build_server
from ticket_server.transports import frames

log = logging.getLogger(__name__)


class CheckFailed(Exception):
    """A start-up check failed; the message (one line) says what to fix."""


def frame_error(exc: Exception) -> ErrorData | None:
    """The JSON-RPC error for a line the transport could not read; None to skip it."""
    if not isinstance(exc, ValidationError):
        return ErrorData(code=INVALID_REQUEST, message=f"Invalid Request: {frames.NOT_A_MESSAGE}")
    errors = exc.errors(include_url=False)
    raw = errors[0].get("input") if errors else None
    if isinstance(raw, (str, bytes)) and not raw.strip():
        return None  # a blank line: nothing was sent
    if raw == NULL_ID:
        return ErrorData(code=INVALID_REQUEST, message=f"Invalid Request: {frames.NULL_ID}")
    if any(e.get("type") == "json_invalid" for e in errors):  # the SDK's JSON parser said so
        return ErrorData(code=PARSE_ERROR, message=frames.PARSE_ERROR)
    message, _ = frames.parse(raw) if isinstance(raw, (str, bytes)) else (raw, None)
    return ErrorData(
        code=INVALID_REQUEST,
        message=f"Invalid Request: {frames.problem(message) or frames.NOT_A_MESSAGE}",
    )


NOT_UTF8 = "\x00 not UTF-8\n"  # a line no JSON parser accepts, answered -32700
NULL_ID = "\x00 null id\n"  # stands for a request with "id": null, answered -32600
_NULL_ID = re.compile(r'"id"\s*:\s*null')


def _null_id_request(line: str) -> bool:
    """A request whose id is null (JSON-RPC 2.0 allows none; MCP forbids null): the
    SDK would read it as a notification and never answer."""
    if _NULL_ID.search(line) is None:
        return False
    message, parse_error = frames.parse(line)
    return (
        parse_error is None
        and isinstance(message, dict)
        and "method" in message
        and message.get("id", 0) is None
    )


class StrictUtf8Lines:
    """stdin as text lines for the SDK's stdio reader, each decoded as strict UTF-8; a
    line that is not becomes ``NOT_UTF8``, never a request with replaced characters, and
    a request with a null id becomes ``NULL_ID``, never a notification."""

    def __init__(self, raw: Any) -> None:
        self.raw = anyio.wrap_file(raw)

    def __aiter__(self) -> StrictUtf8Lines:
        return self

    async def __anext__(self) -> str:
        line = await self.raw.readline()
        if not line:
            raise StopAsyncIteration
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return NOT_UTF8
        return NULL_ID if _null_id_request(text) else text


class InFlight:
    """The ids of the requests read from stdin and not yet answered, as the relays see
    them pass: a request whose id is already among them is answered -32600 at once and
    never reaches the server (which would run both and answer one of them twice, the
    other never); at the end of input the relay waits for them to be answered."""

    def __init__(self) -> None:
        self.ids: set[RequestId] = set()
        self.drained = anyio.Event()
        self.drained.set()

    def begin(self, request_id: RequestId) -> bool:
        key = coerce_request_id(request_id)
        if key in self.ids:
            return False
        self.ids.add(key)
        self.drained = anyio.Event() if len(self.ids) == 1 else self.drained
        return True

    def end(self, request_id: RequestId | None) -> None:
        if request_id is None:
            return
        self.ids.discard(coerce_request_id(request_id))
        if not self.ids:
            self.drained.set()


def duplicate_id(request_id: RequestId) -> JSONRPCError:
    shown = repr(request_id)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=ErrorData(
            code=INVALID_REQUEST,
            message=f"Invalid Request: the id {shown} is already in use by a request "
            "that has not been answered; send each request with a new id",
        ),
    )


async def run_stdio(mcp: FastMCP, drain_seconds: float = 30.0) -> None:
    """Serve ``mcp`` over stdin/stdout until stdin ends (like ``run_stdio_async``); the
    requests still running then are answered first (for at most ``drain_seconds``)."""
    from fastmcp.server.context import reset_transport, set_transport
    from mcp.server.stdio import stdio_server

    token = set_transport("stdio")
    try:
        stdin = StrictUtf8Lines(sys.stdin.buffer)
        async with compat.lifespan(mcp), stdio_server(stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            to_server, from_relay = compat.context_streams(0)
            to_client, from_server = compat.context_streams(0)
            pending = InFlight()

            async def relay() -> None:
                async with to_server:
                    async for item in read_stream:
                        if not isinstance(item, Exception):
                            message = item.message
                            if isinstance(message, JSONRPCRequest) and not pending.begin(
                                message.id
                            ):
                                await write_stream.send(SessionMessage(duplicate_id(message.id)))
                                continue
                            if (
                                isinstance(message, JSONRPCNotification)
                                and message.method == "notifications/cancelled"
                            ):  # a cancelled request is never answered
                                pending.end(cancelled_request_id_from_params(message.params))
                            await to_server.send(item)
                            continue
                        error = frame_error(item)
                        if error is None:
                            continue
                        log.warning("unreadable stdio frame", extra={"code": error.code})
                        await write_stream.send(
                            SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error))
                        )
                    # End of input: answer what is running before the server stops.
                    with anyio.move_on_after(drain_seconds):
                        await pending.drained.wait()

            async def answers() -> None:
                async for item in from_server:
                    await write_stream.send(item)
                    if isinstance(item.message, JSONRPCResponse | JSONRPCError):
                        pending.end(item.message.id)  # once written: the relay may then end

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                tg.start_soon(answers)
                await compat.run_session(mcp, from_relay, to_client)
                tg.cancel_scope.cancel()
            await write_stream.aclose()  # the end of output, as the server would close it
    finally:
        reset_transport(token)


async def startup_checks(runtime: Runtime) -> str:
    """The database is at the code's migration head and the stdio caller is usable:
    the caller's name, or ``CheckFailed`` naming what to fix."""
    from ticket_server.access.identity import IdentityError, check_stdio_identity
    from ticket_server.db import DatabaseSetupError, require_current_schema

    try:
        # On the callers store's engine, which the identity check and the audit use next.
        await require_current_schema(runtime.settings, runtime.callers.engine)
        return await check_stdio_identity(runtime.settings, runtime.callers)
    except (DatabaseSetupError, IdentityError) as exc:
        raise CheckFailed(str(exc)) from exc


def serve_stdio(runtime: Runtime, fail: Callable[[str], None]) -> None:
    """Serve over stdio until stdin ends or SIGTERM arrives; either way the audit trail
    is flushed. A failed start-up check is given to ``fail`` (one line) and ends the
    process with exit status 2, even when stdin has ended before the verdict."""
    verdict: asyncio.Future[str] | None = None

    async def terminate(status: int = 0) -> None:
        # FastMCP's stdin reader is a thread that cannot be cancelled: waiting for it
        # would wait for the next input line. Flush the audit trail, then leave.
        await runtime.stop()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    async def check() -> str:
        try:
            caller = await startup_checks(runtime)
        except CheckFailed as exc:
            fail(str(exc))
            await terminate(2)
            raise  # not reached
        log.info("serving MCP over stdio", extra={"version": __version__, "caller": caller})
        return caller

    async def ready() -> None:
        assert verdict is not None
        await asyncio.shield(verdict)

    mcp = build_server(runtime, ready=ready)

    async def main() -> None:
        nonlocal verdict
        verdict = asyncio.ensure_future(check())
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(terminate()))
        await run_stdio(mcp, runtime.settings.tool_timeout + 5)
        # End of input: the lifespan has ended and flushed the audit trail. The exit
        # status still reports a failed check. Then leave rather than let asyncio.run
        # wait for worker threads: a query cancelled inside a driver's thread can leave
        # one that never ends.
        await verdict
        await terminate()

    asyncio.run(main())
