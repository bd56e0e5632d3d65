"""Every touch of FastMCP, MCP SDK, SQLAlchemy, redis-py, uvicorn and `limits` internals,
in one place, and the workarounds of an asyncio behaviour (``deadline``, ``connect_apart``,
``redis_connections_apart``).

Each function here leans on something its library does not promise (a private
attribute, an undocumented hook). ``tests/test_compat.py`` checks each one against the
installed versions, so an upgrade that changes them fails there, loudly, rather than as
a strange fault somewhere else.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import signal
import sys
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from fastmcp.resources import ResourceContent
    from limits.storage import MemoryStorage


def dereference_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """FastMCP's ``dereference_refs`` (the schema's ``$ref``s inlined), with ``jsonref``
    imported without ``requests``. ``jsonref`` imports ``requests``, when it is installed,
    only to fetch remote ``$ref``s, and FastMCP strips every remote ``$ref`` before
    ``jsonref`` sees a schema. Where ``requests`` is installed (no dependency of ours
    needs it; our test extras bring it), importing it costs a server process memory and
    start-up time (some 100 modules: requests, urllib3, charset_normalizer, certifi;
    bench/ANALYSIS.md). Leans on ``jsonref`` reading ``requests`` once, at its
    own import (``jsonref.requests``); a later import of ``requests`` elsewhere works as
    usual."""
    import importlib
    import sys

    from fastmcp.utilities.json_schema import dereference_refs as inline

    if "jsonref" not in sys.modules and "requests" not in sys.modules:
        sys.modules["requests"] = None  # type: ignore[assignment]  # importing it raises ImportError
        try:
            importlib.import_module("jsonref")
        finally:
            del sys.modules["requests"]
    return inline(schema)


async def skip_listing_for_header_checks(mcp: FastMCP) -> None:
    """Spare every 2026-07-28 HTTP tools/call an internal tools/list.

    Before a tools/call the MCP SDK checks its ``Mcp-Param-*`` headers against the
    ``x-mcp-header`` declarations in the tool's input schema, which it finds by running
    the server's tools/list handler, through the whole call pipeline, unless the low-level
    server's ``get_tool_input_schema`` lookup is set. None of our tools declares a header,
    so the lookup answers "nothing to validate" (None) for every name. Should a tool ever
    declare one, the SDK's caller-scoped listing stays in place (an unscoped lookup could
    tell a caller about a tool it may not see). Touches ``FastMCP._mcp_server``.
    """
    from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

    for tool in await mcp.local_provider.list_tools():
        if find_invalid_x_mcp_header(tool.parameters) is None and x_mcp_header_map(tool.parameters):
            return
    mcp._mcp_server.get_tool_input_schema = lambda name: None


def add_request_middleware(mcp: FastMCP, middleware: Any) -> None:
    """Add an MCP SDK ``ServerMiddleware`` (``async (ctx, call_next)``): it sees each
    request's raw params before the SDK or FastMCP validates them. FastMCP has no public
    way to add one. Touches ``FastMCP._mcp_server.middleware``."""
    mcp._mcp_server.middleware.append(middleware)


def lifespan(mcp: FastMCP) -> AbstractAsyncContextManager[Any]:
    """The server's lifespan as FastMCP's own transports enter it (``_lifespan_manager``)."""
    return mcp._lifespan_manager()


async def run_session(mcp: FastMCP, read_stream: Any, write_stream: Any) -> None:
    """Serve one connection on the low-level MCP server, as ``run_stdio_async`` does
    (``_mcp_server.run``), on streams we relay (see ``transports.stdio``)."""
    await mcp._mcp_server.run(
        read_stream, write_stream, mcp._mcp_server.create_initialization_options()
    )


def claim_stdout() -> tuple[BinaryIO, Callable[[], None] | None]:
    """The wire for stdio's frames, claimed as the SDK's ``stdio_server`` claims it
    (``mcp.server.stdio._claim_fd``): a private duplicate of fd 1, while fd 1 itself
    points at stderr, so stray output of a library or a child process cannot corrupt the
    frames. The callable (None when nothing was diverted) points fd 1 back at the wire."""
    from mcp.server import stdio

    return stdio._claim_fd(1, sys.stdout, "wb", stdio._open_stdout_diversion)


def base64_resource_content(
    blob: str, mime_type: str, meta: dict[str, Any] | None = None
) -> ResourceContent:
    """A FastMCP resource content sent as a blob already in base64 (``blob``): given
    bytes, ``ResourceContent`` encodes them whole itself (the file, its base64 as bytes
    and as text, at once). FastMCP turns a content into MCP's type through its
    ``to_mcp_resource_contents``, which this one overrides."""
    content = _encoded_content_class()(b"", mime_type=mime_type, meta=meta)
    content._blob = blob  # type: ignore[attr-defined]
    return content


def resource_content_size(content: Any) -> int:
    """The characters or bytes a FastMCP resource content carries (one made by
    ``base64_resource_content``: its base64's)."""
    value = getattr(content, "_blob", None) or getattr(content, "content", "")
    return len(value) if isinstance(value, str | bytes) else 0


@functools.cache
def _encoded_content_class() -> type[ResourceContent]:
    import mcp.types as mt
    from fastmcp.resources import ResourceContent
    from pydantic import PrivateAttr

    class EncodedContent(ResourceContent):
        _blob: str = PrivateAttr("")

        def to_mcp_resource_contents(self, uri: Any) -> mt.BlobResourceContents:
            return mt.BlobResourceContents(
                uri=str(uri),
                blob=self._blob,
                mime_type=self.mime_type or "application/octet-stream",
                _meta=self.meta,
            )

    return EncodedContent


def context_streams(size: int = 0) -> tuple[Any, Any]:
    """A memory object stream pair that carries the request context, as the SDK's
    transports make them (``mcp.shared._context_streams``)."""
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    return create_context_streams[SessionMessage | Exception](size)


def graceful_uvicorn_server(config: Any) -> Any:
    """A ``uvicorn.Server`` whose SIGTERM ends with exit status 0.

    uvicorn re-raises a captured SIGTERM once its graceful shutdown (lifespan included:
    the audit trail is flushed there) is done, so the process would die by the signal; a
    supervisor that asked the server to stop expects status 0. Touches
    ``uvicorn.Server._captured_signals``."""
    import uvicorn

    class GracefulServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            if sig == signal.SIGTERM and sig in self._captured_signals:
                self._captured_signals.remove(sig)

    return GracefulServer(config)


def h11_with_header_deadline(seconds: float) -> type:
    """uvicorn's h11 protocol, closing a connection that has not sent a whole request
    head (request line and headers) within ``seconds`` of connecting or of its previous
    answer: uvicorn's own keep-alive timeout stops at the first byte, so a client that
    sends a partial header line (slowloris) would hold the connection for ever.
    Touches ``H11Protocol.conn`` and its ``cycle``.

    Each connection also sends without waiting for acknowledgements (``TCP_NODELAY``).
    asyncio sets it only on connections of a listening socket made with protocol
    ``IPPROTO_TCP``, and the one uvicorn binds (``Config.bind_socket``, which ``serve``
    and ``--workers`` use) is made with protocol 0: an answer written in two pieces then
    waited for the client's delayed acknowledgement, about 40 ms on Linux."""
    import socket

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        header_deadline: Any = None

        def _arm(self) -> None:
            if self.header_deadline is not None:
                self.header_deadline.cancel()
            self.header_deadline = self.loop.call_later(seconds, self._head_overdue)

        def _head_overdue(self) -> None:
            idle = self.cycle is None or self.cycle.response_complete
            if idle and self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.header_deadline is not None:
                self.header_deadline.cancel()
            super().connection_lost(exc)

    return HeaderDeadlineProtocol


def advertise_fixed_lists(mcp: FastMCP) -> None:
    """Advertise ``listChanged: false`` for tools, resources and prompts over both
    handshakes: the server's lists are fixed once it is built and it never sends a
    ``notifications/*/list_changed``. ``server/discover`` already says false; the legacy
    ``initialize`` takes the low-level server's notification options (FastMCP's default:
    true). Touches ``FastMCP._mcp_server.notification_options``."""
    from mcp.server.lowlevel.server import NotificationOptions

    mcp._mcp_server.notification_options = NotificationOptions(
        prompts_changed=False,
        resources_changed=False,
        tools_changed=False,
    )


def hand_invalid_request_state_to(mcp: FastMCP, tools: Collection[str], marker: str) -> None:
    """Let the tools named in ``tools`` refuse an invalid 2026-07-28 request state
    themselves, through the call pipeline (so the refusal is an ``isError`` result and
    is audited), instead of the SDK's ``RequestStateBoundary`` answering a bare
    JSON-RPC -32602 before any FastMCP middleware runs.

    A ``tools/call`` of one of ``tools`` whose ``requestState`` the boundary rejects
    (altered, expired, sealed for other arguments or another principal or server) goes
    on with ``requestState`` replaced by ``marker``, which the tool must refuse; the
    boundary keeps sealing and verifying everything else, and every other method and
    tool keeps the SDK's answer. Touches ``FastMCP._mcp_server.middleware`` (where
    FastMCP installs the boundary) and the rejection's wire shape
    (``data: {"reason": "invalid_request_state"}``)."""
    from mcp.server.request_state import RequestStateBoundary
    from mcp.shared.exceptions import MCPError
    from mcp_types.methods import is_input_required

    chain = mcp._mcp_server.middleware
    index = next(i for i, m in enumerate(chain) if isinstance(m, RequestStateBoundary))
    boundary = chain[index]
    names = frozenset(tools)

    async def refused_in_the_tool(ctx: Any, call_next: Any) -> Any:
        params = ctx.params
        if (
            ctx.method != "tools/call"
            or not isinstance(params, Mapping)
            or params.get("name") not in names
        ):
            return await boundary(ctx, call_next)
        passed = False

        async def inner(verified: Any) -> Any:
            nonlocal passed
            passed = True
            return await call_next(verified)

        try:
            return await boundary(ctx, inner)
        except MCPError as exc:
            rejected = (
                isinstance(exc.data, Mapping) and exc.data.get("reason") == "invalid_request_state"
            )
            if passed or not rejected:
                raise
            result = await call_next(replace(ctx, params={**params, "requestState": marker}))
            if is_input_required(result):  # never send state the boundary did not seal
                raise
            return result

    chain[index] = refused_in_the_tool


EXPIRY_SECONDS = 1.0
"""How often the in-memory rate-limit storage drops expired entries (``memory_storage``)."""


def memory_storage() -> MemoryStorage:
    """`limits`' in-memory storage (``memory://``), its expired entries dropped on the
    calling thread at most every ``EXPIRY_SECONDS``. As shipped, every hit after a pause
    of 10 ms starts a timer thread to drop them, and ``Thread.start`` waits for the new
    thread to be scheduled: on a busy machine that wait is on every tools/call. Counting
    is unchanged (a hit never reads an expired entry; dropping them only frees memory).
    Touches ``MemoryStorage``'s name-mangled ``__schedule_expiry`` and ``__expire_events``."""
    import time

    from limits.storage import MemoryStorage

    class Storage(MemoryStorage):
        expired_at = 0.0

        def _MemoryStorage__schedule_expiry(self) -> None:
            now = time.monotonic()
            if now - self.expired_at >= EXPIRY_SECONDS:
                self.expired_at = now
                self._MemoryStorage__expire_events()  # type: ignore[attr-defined]  # name-mangled

    return Storage()


_stream_sessions: Any = None  # a ContextVar[bool], made by ``stream_sessions_when``


def stream_sessions_when() -> Any:  # -> contextvars.ContextVar[bool]
    """A flag that makes the legacy Streamable HTTP session opened while it is set answer
    its POSTs as SSE streams although the app is built with ``json_response=True``: a
    JSON body carries only the response, so a tool that must ask the person
    (``elicitation/create``, sent on the stream of the call that asks) has no channel
    for the question. The HTTP gate sets the flag (a ``ContextVar``: this request only)
    on an ``initialize`` that declares the elicitation capability. Wraps
    ``StreamableHTTPServerTransport.__init__`` (made in the opening request's task) to
    clear its ``is_json_response_enabled``, which its POST handler and its message router
    read; installed once."""
    global _stream_sessions
    if _stream_sessions is not None:
        return _stream_sessions
    from contextvars import ContextVar

    from mcp.server.streamable_http import StreamableHTTPServerTransport

    flag: ContextVar[bool] = ContextVar("ticket_server_stream_session", default=False)
    made = StreamableHTTPServerTransport.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        if flag.get():
            self.is_json_response_enabled = False

    StreamableHTTPServerTransport.__init__ = init  # type: ignore[method-assign]
    _stream_sessions = flag
    return flag


@asynccontextmanager
async def deadline(seconds: float) -> AsyncIterator[asyncio.Timeout]:
    """``asyncio.timeout(seconds)`` whose timer is scheduled outside the caller's context.

    A timer handle keeps the context it was scheduled in until the loop drops it, even
    once cancelled: ``Handle.cancel`` drops the callback, not the context. The loop drops
    a cancelled handle when it reaches the top of the timer heap, or when cancelled ones
    are over half of more than 100 scheduled (CPython 3.11-3.13). Made in a request's
    context, the deadline of every call held the request (its arguments, a 10 MB
    upload's base64 included) for up to the whole timeout after the call ended."""
    async with asyncio.timeout(None) as timeout:
        reschedule(timeout, seconds)
        yield timeout


def reschedule(timeout: asyncio.Timeout, seconds: float) -> None:
    """``timeout`` due ``seconds`` from now, its timer scheduled in an empty context
    (``deadline`` says why)."""
    when = asyncio.get_running_loop().time() + seconds
    contextvars.Context().run(timeout.reschedule, when)


def connect_apart(
    connect: Callable[..., Coroutine[Any, Any, Any]],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``connect`` run in a task of its own, in an empty context: given to SQLAlchemy's
    asyncpg dialect as ``async_creator_fn`` (a connect argument its DBAPI adapter takes
    in place of ``asyncpg.connect``, with the same arguments).

    A connection's socket reader is a loop handle made in the context current when the
    connection opens, kept as long as the connection lives (``deadline`` says why that
    matters): a pool connection opened for a call kept that call's request, arguments
    included, until the connection closed."""

    async def connect_in_empty_context(*args: Any, **kwargs: Any) -> Any:
        task: asyncio.Task[Any] = asyncio.create_task(
            connect(*args, **kwargs), context=contextvars.Context()
        )
        return await task

    return connect_in_empty_context


def redis_connections_apart(pool: Any) -> None:
    """Make the connections of redis-py's asyncio ``pool`` open their sockets in a task
    of their own, in an empty context (``connect_apart`` says why): its
    ``connection_class`` becomes a subclass whose ``connect_check_health``, the one way
    a connection opens its socket, runs apart."""
    base: type[Any] = pool.connection_class

    class ConnectionApart(base):  # type: ignore[misc]
        async def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
            if not self.is_connected:
                await connect_apart(super().connect_check_health)(*args, **kwargs)

    ConnectionApart.__name__ = ConnectionApart.__qualname__ = f"{base.__name__}Apart"
    pool.connection_class = ConnectionApart
