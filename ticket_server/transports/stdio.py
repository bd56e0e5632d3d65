"""The stdio transport: FastMCP's ``run_stdio_async``, with three additions.

- stdin is read and stdout written here, not by the SDK's ``stdio_server`` (whose claim
  of fd 1, pointed at stderr while the wire moves to a private duplicate, is kept):
  - malformed frames are answered as JSON-RPC 2.0 requires (``transports.frames``),
    where the SDK's reader drops a line it cannot parse without a word, so a client
    that sent one would wait for an answer that never comes. Blank lines are skipped.
    A line that is not UTF-8 is a Parse error (RFC 8259 section 8.1: JSON text is
    UTF-8), as over HTTP: the SDK's reader would replace the bytes with U+FFFD;
  - each line is parsed once, from its bytes, and dropped before the request runs: a
    file uploaded as base64 is then held once by the parsed arguments, where the SDK's
    reader holds the line's text until the next line comes, beside its own parse;
  - each answer is serialised straight to bytes, its long texts (a file read as base64)
    a piece at a time (``frame_pieces``).
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
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, BinaryIO

import anyio
import pydantic_core
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
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from ticket_server import __version__, compat
from ticket_server.server import Runtime, build_server
from ticket_server.transports import frames

log = logging.getLogger(__name__)


class CheckFailed(Exception):
    """A start-up check failed; the message (one line) says what to fix."""


def read_frame(line: bytes) -> SessionMessage | ErrorData | None:
    """The message one stdin line holds; the JSON-RPC error that answers a line holding
    none (sent with ``"id": null``); None for a blank line. The JSON is parsed once,
    into plain values, then validated as a message: ``validate_json`` on the line, as
    the SDK's reader does, tries each kind of message on the text and can copy a long
    string once per kind."""
    if not line.strip(b" \t\r\n"):  # JSON's whitespace (RFC 8259 section 2)
        return None
    try:
        value = pydantic_core.from_json(line, allow_inf_nan=False)  # RFC 8259 section 6
    except ValueError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return ErrorData(code=PARSE_ERROR, message=frames.NOT_UTF8)
        deep = str(exc).startswith("recursion limit exceeded")  # pydantic-core's depth, 200
        return ErrorData(code=PARSE_ERROR, message=frames.TOO_DEEP if deep else frames.PARSE_ERROR)
    # HTTP's check first: it also refuses an id MCP forbids (null, a fraction, a boolean,
    # an object), with which the SDK would read a request as a notification, unanswered.
    problem = frames.problem(value)
    if problem is None:
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_python(value, by_name=False))
        except ValidationError:
            problem = frames.NOT_A_MESSAGE
    return ErrorData(code=INVALID_REQUEST, message=f"Invalid Request: {problem}")


async def stdin_frames(raw: Any) -> AsyncIterator[SessionMessage | ErrorData]:
    """``read_frame`` of each line of the binary stream ``raw`` until it ends; no line is
    held while its message is handled."""
    stdin = anyio.wrap_file(raw)
    while True:
        line = await stdin.readline()
        if not line:
            return
        frame = read_frame(line)
        del line  # an upload's base64 lives on in the parsed arguments alone
        if frame is not None:
            yield frame


LONG_TEXT = 1 << 20
"""A text of an answer longer than this many characters (a file read as base64) is
serialised and written in pieces of this size."""


def _set_apart(value: Any, long: list[str], nonce: str) -> Any:
    """``value`` (a JSON-RPC result: dicts, lists and scalars) with each text longer than
    ``LONG_TEXT`` appended to ``long`` and replaced by a marker ``"\\x00<nonce>:<index>"``;
    the same object when it holds none."""
    if isinstance(value, str) and len(value) > LONG_TEXT:
        long.append(value)
        return f"\x00{nonce}:{len(long) - 1}"
    if isinstance(value, dict):
        items = {key: _set_apart(item, long, nonce) for key, item in value.items()}
        return items if any(items[key] is not value[key] for key in value) else value
    if isinstance(value, list):
        listed = [_set_apart(item, long, nonce) for item in value]
        return listed if any(a is not b for a, b in zip(listed, value, strict=True)) else value
    return value


def frame_pieces(message: Any) -> Iterator[bytes]:
    """The JSON of ``message`` (a ``JSONRPCMessage``), in pieces whose concatenation is
    ``jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True)``, the
    bytes the SDK's writer wrote: an answer's long texts come a piece at a time, so a
    file read as base64 is not copied whole again as JSON."""
    long: list[str] = []
    nonce = secrets.token_hex(8)
    if isinstance(message, JSONRPCResponse):
        result = _set_apart(message.result, long, nonce)
        if long:
            message = message.model_copy(update={"result": result})
    frame = jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True)
    markers = [pydantic_core.to_json(f"\x00{nonce}:{index}") for index in range(len(long))]
    start = 0
    for at, index in sorted((frame.index(marker), i) for i, marker in enumerate(markers)):
        yield frame[start:at] + b'"'
        text = long[index]
        for offset in range(0, len(text), LONG_TEXT):
            yield pydantic_core.to_json(text[offset : offset + LONG_TEXT])[1:-1]
        yield b'"'
        start = at + len(markers[index])
    yield frame[start:] if start else frame


async def write_frames(messages: Any, wire: BinaryIO) -> None:
    """Write each message of the stream ``messages`` to ``wire``, one line of JSON each
    (``frame_pieces``): the bytes the SDK's writer wrote, without its copies of a large
    answer (its text, the text with a newline, the encoded bytes)."""
    out = anyio.wrap_file(wire)
    async with messages:
        async for item in messages:
            for piece in frame_pieces(item.message):
                await out.write(piece)
            await out.write(b"\n")
            await out.flush()


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

    token = set_transport("stdio")
    wire, restore = compat.claim_stdout()
    try:
        async with compat.lifespan(mcp):
            write_stream, outgoing = compat.context_streams(0)
            to_server, from_relay = compat.context_streams(0)
            to_client, from_server = compat.context_streams(0)
            pending = InFlight()

            async def relay() -> None:
                async with to_server:
                    async for frame in stdin_frames(sys.stdin.buffer):
                        if isinstance(frame, ErrorData):
                            log.warning("unreadable stdio frame", extra={"code": frame.code})
                            await write_stream.send(
                                SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=frame))
                            )
                            continue
                        message = frame.message
                        if isinstance(message, JSONRPCRequest) and not pending.begin(message.id):
                            await write_stream.send(SessionMessage(duplicate_id(message.id)))
                            continue
                        if (
                            isinstance(message, JSONRPCNotification)
                            and message.method == "notifications/cancelled"
                        ):  # a cancelled request is never answered
                            pending.end(cancelled_request_id_from_params(message.params))
                        await to_server.send(frame)
                    # End of input: answer what is running before the server stops.
                    with anyio.move_on_after(drain_seconds):
                        await pending.drained.wait()

            async def answers() -> None:
                async for item in from_server:
                    await write_stream.send(item)
                    if isinstance(item.message, JSONRPCResponse | JSONRPCError):
                        pending.end(item.message.id)  # once written: the relay may then end

            async with anyio.create_task_group() as writing:
                writing.start_soon(write_frames, outgoing, wire)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(relay)
                    tg.start_soon(answers)
                    await compat.run_session(mcp, from_relay, to_client)
                    tg.cancel_scope.cancel()
                await write_stream.aclose()  # the end of output: the writer writes what is left
    finally:
        if restore is not None:
            restore()
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
