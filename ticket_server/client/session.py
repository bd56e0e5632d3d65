"""One MCP server connection, owned by one task.

The SDK's cancel scopes and task groups belong to the task that opened the session,
so a ``ServerSession`` runs an owner task that opens the ``mcp.Client`` (``mode="auto"``:
``server/discover`` first, ``initialize`` when the server does not know it) and serves
requests that callers in any task hand it through a queue. Each request carries an
absolute deadline that both sides honour: the caller stops waiting and the owner
cancels the request at the same instant.

A server that goes away (stdio child exited, HTTP endpoint refusing) fails the calls in
flight with ``ServerUnavailable``; the owner then ends, and the next call starts a new
one: a restarted stdio server is reconnected on the next call, also when it exited
between calls (its end of stdout is watched).
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TextIO, TypeVar, cast

import anyio
import anyio.abc
import httpx2 as httpx

from ticket_server.client.audit import Audit, _trace_id, current_trace_id
from ticket_server.client.config import ServerConfig

T = TypeVar("T")


class KitError(Exception):
    """A call the kit could not complete; ``str()`` is one line a person or a model can read."""


class ServerUnavailable(KitError):
    """The server could not be reached, or went away during the call."""


class CallTimeout(KitError, TimeoutError):
    """No answer within the call's deadline."""


@dataclass(frozen=True)
class Handshake:
    """What one connection negotiated: which handshake ran (``server/discover``, or the
    legacy ``initialize`` after the server refused discover), the protocol revision,
    the server's identity and its capabilities."""

    method: Literal["server/discover", "initialize", "none"]
    protocol_version: str
    server_name: str | None
    server_version: str | None
    instructions: str | None
    capabilities: dict[str, Any]
    generation: int

    @classmethod
    def of(cls, client: Any, mode: str, generation: int) -> Handshake:
        session = client.session
        # The SDK keeps a DiscoverResult only when server/discover answered (a pinned
        # modern mode asks for one: see ServerSession._own).
        if session.discover_result is not None:
            method = "server/discover"
        else:
            method = "initialize"
        info = client.server_info
        return cls(
            method=method,  # type: ignore[arg-type]
            protocol_version=client.protocol_version,
            server_name=info.name if info else None,
            server_version=info.version if info else None,
            instructions=client.instructions,
            capabilities=client.server_capabilities.model_dump(
                by_alias=True, mode="json", exclude_none=True
            ),
            generation=generation,
        )


@dataclass(eq=False)
class _Request(Generic[T]):
    op: Callable[[Any], Awaitable[T]]
    deadline: float  # anyio.current_time() clock
    trace_id: str
    what: str
    finished: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope | None = None
    waiter: anyio.CancelScope | None = None
    abandoned: bool = False
    value: Any = None
    error: BaseException | None = None

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self.finished.is_set():
            self.value, self.error = value, error
            self.finished.set()

    def hold(self) -> None:
        """Stop the clock on both sides (a person is answering the server)."""
        for scope in (self.scope, self.waiter):
            if scope is not None:
                scope.deadline = math.inf

    def release(self, deadline: float) -> None:
        """Start the clock again with the new absolute ``deadline``."""
        self.deadline = deadline
        for scope in (self.scope, self.waiter):
            if scope is not None:
                scope.deadline = deadline

    def abandon(self) -> None:
        self.abandoned = True
        if self.scope is not None:
            self.scope.cancel()


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (or any exception in its group) means the transport is gone."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, BaseExceptionGroup):
        return any(connection_lost(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(
        exc,
        (
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.EndOfStream,
            httpx.TransportError,
            OSError,
        ),
    )


@asynccontextmanager
async def _watch_end(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    """``transport``'s streams, calling ``on_end()`` when the server's side ends (EOF):
    a stdio server that exits between calls is otherwise noticed only by the next call."""
    async with transport as (read, write):
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def relay() -> None:
            async with send:
                async for item in read:
                    await send.send(item)
            on_end()

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            try:
                yield receive, write
            finally:
                tg.cancel_scope.cancel()


def client_info() -> Any:
    """How the kit names itself in the handshake (not the SDK's default ``mcp 0.1.0``)."""
    from importlib.metadata import PackageNotFoundError, version

    from mcp_types import Implementation

    try:
        ours = version("ticket-server")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        ours = "0"
    return Implementation(name="ticket-server-client-kit", version=ours)


def _without_credentials(url: str) -> str:
    """``url`` as the audit shows it: no userinfo, and every query value blanked (a
    token in the query string is still a token)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    query = urlencode([(k, "redacted") for k, _ in parse_qsl(parts.query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return _describe(exc.exceptions[0])
    return (str(exc).replace("\n", " ").strip() or type(exc).__name__)[:300]


class ServerSession:
    """The kit's handle on one server. Use inside ``async with``; ``run(op)`` from any task.

    ``elicitation_callback`` answers the server's elicitation requests (legacy
    ``elicitation/create`` and the elicitations inside a 2026-07-28
    ``InputRequiredResult``, which the SDK routes to the same callback);
    ``sampling_callback`` and ``list_roots_callback`` answer ``sampling/createMessage``
    and ``roots/list``; ``on_notification(session, message)`` sees every notification.
    ``errlog``: where a stdio server's stderr goes (default: ours);
    ``on_http_response``: an httpx response hook, e.g. to name an HTTP 401 or 404.
    A ``ServerUnavailable`` keeps the transport's own exception as ``__cause__``."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        audit: Audit | None = None,
        elicitation_callback: Any = None,
        sampling_callback: Any = None,
        list_roots_callback: Any = None,
        on_notification: Callable[[ServerSession, Any], Awaitable[None]] | None = None,
        errlog: TextIO | None = None,
        on_http_response: Callable[[Any], Awaitable[None]] | None = None,
    ) -> None:
        self.errlog = errlog
        self.on_http_response = on_http_response
        self.config = config
        self.name = config.name
        self.audit = audit or Audit()
        self.elicitation_callback = elicitation_callback
        self.sampling_callback = sampling_callback
        self.list_roots_callback = list_roots_callback
        self._running: set[_Request[Any]] = set()
        self.on_notification = on_notification
        self.handshake: Handshake | None = None
        self.handshakes: list[Handshake] = []  # one per connection, oldest first
        self._generation = 0
        self._send: Any = None
        self._owner_scope: anyio.CancelScope | None = None
        self._lock = anyio.Lock()
        self._closing = False
        self._tg: anyio.abc.TaskGroup | None = None
        self._stack: AsyncExitStack | None = None
        self._http_refusal: str | None = None  # the current connection's last HTTP error

    async def __aenter__(self) -> ServerSession:
        self._stack = AsyncExitStack()
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop taking requests, let the owner close the connection (bounded), and wait."""
        self._closing, self._tg = True, None
        if self._send is not None:
            self._retire(self._send)
        if self._owner_scope is not None:
            # Calls still in flight are cancelled; closing is bounded like any call.
            self._owner_scope.deadline = min(self._owner_scope.deadline, anyio.current_time() + 5)
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()
            self.audit.emit("close", server=self.name)

    # -- the caller side ---------------------------------------------------------------

    async def run(
        self,
        op: Callable[[Any], Awaitable[T]],
        *,
        deadline_seconds: float,
        what: str,
        on_request: Callable[[_Request[Any] | None], None] | None = None,
    ) -> T:
        """Run ``op(client)`` on the owner task, with the connected ``mcp.Client``.

        Raises ``CallTimeout`` when ``deadline_seconds`` pass (connecting included),
        ``ServerUnavailable`` when the server cannot be reached or goes away, and
        whatever ``op`` raised otherwise. ``on_request`` sees the request while it runs
        (and None when it ended), so that its deadline can be extended."""
        request: _Request[T] = _Request(
            op,
            deadline=anyio.current_time() + deadline_seconds,
            trace_id=current_trace_id(),
            what=what,
        )
        send = await self._owner(request.trace_id)
        try:
            send.send_nowait(request)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ServerUnavailable(f"server {self.name}: closed") from exc
        if on_request is not None:
            on_request(request)
        try:
            with anyio.CancelScope(deadline=request.deadline) as waiter:
                request.waiter = waiter
                waiter.deadline = request.deadline
                await request.finished.wait()
        finally:
            request.waiter = None
            if on_request is not None:
                on_request(None)
            if not request.finished.is_set():  # the deadline, or the caller was cancelled
                request.abandon()
        if not request.finished.is_set():
            state = "" if self._connected(self._generation) else " (no connection was established)"
            raise CallTimeout(
                f"server {self.name}: {what}: no answer within {deadline_seconds:g} s{state}"
            )
        if request.error is not None:
            raise request.error
        return cast(T, request.value)

    async def _owner(self, trace_id: str) -> Any:
        async with self._lock:
            if self._send is None:
                if self._tg is None:
                    raise ServerUnavailable(
                        f"server {self.name}: the session is not open (use it inside `async with`)"
                    )
                send, receive = anyio.create_memory_object_stream[_Request[Any]](math.inf)
                self._send = send
                self._generation += 1
                self._tg.start_soon(self._own, send, receive, self._generation, trace_id)
            return self._send

    # -- the owner side ----------------------------------------------------------------

    def _client(self, stack: AsyncExitStack, on_end: Callable[[], None]) -> Any:
        from mcp import Client, StdioServerParameters

        config = self.config
        if config.transport == "stdio":
            from mcp.client.stdio import get_default_environment, stdio_client

            assert config.command
            env = {**get_default_environment(), **(config.env or {})}
            params = StdioServerParameters(
                command=config.command[0], args=config.command[1:], env=env, cwd=config.cwd
            )
            transport: Any = _watch_end(
                stdio_client(params, **({"errlog": self.errlog} if self.errlog else {})), on_end
            )
            # Arguments may carry a credential (``--api-key ...``): only their count.
            count = len(config.command) - 1
            shown = f"{config.command[0]} ({count} argument{'s' if count != 1 else ''}, not logged)"
        else:
            from mcp.client.streamable_http import streamable_http_client

            token = config.auth.token() if config.auth else None
            headers = {"Authorization": f"Bearer {token}"} if token else None

            self._http_refusal = None

            async def session_gone(response: Any) -> None:
                # The last answer's HTTP error, named in a failure the SDK words generically.
                if response.status_code >= 400:
                    self._http_refusal = (
                        f"HTTP {response.status_code} {response.reason_phrase}".strip()
                    )
                else:
                    self._http_refusal = None
                # 404 to a request naming a session: the server no longer knows it (it
                # restarted, or expired it). MCP says start a new one: the next call does.
                if response.status_code == 404 and "mcp-session-id" in response.request.headers:
                    on_end()

            hooks = {"response": [session_gone, *filter(None, [self.on_http_response])]}
            # No read timeout: a legacy call's SSE stream stays quiet while a person answers
            # the server; every request is bounded by its own deadline instead.
            http = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(config.deadline_seconds, read=None),
                event_hooks=hooks,
            )
            stack.push_async_callback(http.aclose)
            assert config.url  # checked by ServerConfig
            transport = streamable_http_client(config.url, http_client=http)
            shown = _without_credentials(config.url)
        self.audit.emit(
            "connect", server=self.name, transport=config.transport, target=shown, pid=os.getpid()
        )
        return Client(
            transport,
            mode=config.mode,
            client_info=client_info(),
            elicitation_callback=self.elicitation_callback,
            sampling_callback=self.sampling_callback,
            list_roots_callback=self.list_roots_callback,
            message_handler=self._message,
        )

    async def _message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.audit.emit("transport_error", server=self.name, error=_describe(message))
            return
        root = getattr(message, "root", message)
        # A notification belongs to the turn of the call it arrived during; with several
        # calls in flight it cannot be told (MCP ties only progress to a request), so it
        # is logged under the connection's turn with every candidate named.
        turns = sorted({r.trace_id for r in self._running})
        body = (
            root.model_dump(by_alias=True, mode="json", exclude_none=True)
            if hasattr(root, "model_dump")
            else {"repr": repr(root)[:1000]}
        )
        self.audit.emit(
            "notification",
            server=self.name,
            trace_id=turns[0] if len(turns) == 1 else None,
            method=getattr(root, "method", type(root).__name__),
            params=body.get("params"),
            **({"in_flight_trace_ids": turns} if len(turns) > 1 else {}),
        )
        if self.on_notification is not None:
            await self.on_notification(self, root)

    async def _own(self, send: Any, receive: Any, generation: int, trace_id: str) -> None:
        _trace_id.set(trace_id)  # the connection is logged under the turn that caused it
        why, cause = "closed", None
        try:
            with anyio.CancelScope() as scope:
                self._owner_scope = scope
                scope.deadline = anyio.current_time() + self.config.connect_seconds
                async with AsyncExitStack() as stack:
                    client = self._client(stack, lambda: self._ended(send, generation))
                    await stack.enter_async_context(client)
                    if self.config.mode not in ("auto", "legacy"):
                        # A pinned revision starts from a self-description the SDK makes
                        # up; ask the server for its own (name, instructions, capabilities).
                        from mcp.types import DiscoverResult

                        discovered = await client.session.send_discover(self.config.mode)
                        client.session.adopt(DiscoverResult.model_validate(discovered))
                    scope.deadline = math.inf
                    self.handshake = Handshake.of(client, self.config.mode, generation)
                    self.handshakes.append(self.handshake)
                    self.audit.emit(
                        "handshake",
                        server=self.name,
                        method=self.handshake.method,
                        protocol_version=self.handshake.protocol_version,
                        server_name=self.handshake.server_name,
                        server_version=self.handshake.server_version,
                        capabilities=sorted(self.handshake.capabilities),
                        generation=generation,
                    )
                    async with anyio.create_task_group() as calls:
                        async for request in receive:
                            calls.start_soon(self._serve, client, request, send, scope)
            if scope.cancelled_caught and not self._closing:
                why = (
                    "connection lost"
                    if self._connected(generation)
                    else (f"could not connect within {self.config.connect_seconds:g} s")
                )
        except Exception as exc:  # every failure of the connection ends this owner
            cause = exc
            said = _describe(exc)
            if self._http_refusal and self._http_refusal.split()[1] not in said:
                said = f"{said} ({self._http_refusal})"  # "Server returned an error response"
            why = f"{'connection lost' if self._connected(generation) else 'could not connect'}: {said}"
        finally:
            self._retire(send)
            leftover = ServerUnavailable(f"server {self.name}: {why}")
            leftover.__cause__ = cause
            with anyio.CancelScope(shield=True):
                async for request in receive:
                    request.settle(error=leftover)
            if why != "closed":
                self.audit.emit("disconnect", server=self.name, reason=why, generation=generation)

    def _ended(self, send: Any, generation: int) -> None:
        """The stdio server closed its stdout (exited), or the HTTP server no longer knows
        the session, while this connection was current, with or without a call in
        flight: the next call starts a new connection."""
        if self._send is send and not self._closing:
            self.audit.emit(
                "disconnect",
                server=self.name,
                reason="the server closed the connection",
                generation=generation,
            )
            self._retire(send)

    def _connected(self, generation: int) -> bool:
        return self.handshake is not None and self.handshake.generation == generation

    def _retire(self, send: Any) -> None:
        """No new request reaches this connection's queue; the next call starts a new owner."""
        if self._send is send:
            self._send = None
        send.close()

    async def _serve(
        self, client: Any, request: _Request[Any], send: Any, owner: anyio.CancelScope
    ) -> None:
        _trace_id.set(request.trace_id)  # this task's own context: events it causes carry the turn
        self._running.add(request)
        try:
            with anyio.CancelScope(deadline=request.deadline) as scope:
                request.scope = scope
                scope.deadline = request.deadline  # moved since, if a person was asked
                if request.abandoned:
                    scope.cancel()
                try:
                    request.settle(await request.op(client))
                except Exception as exc:
                    if connection_lost(exc) or self._send is not send:  # also: ended meanwhile
                        self._retire(send)
                        owner.cancel()
                        gone = ServerUnavailable(
                            f"server {self.name}: went away ({_describe(exc)})"
                        )
                        gone.__cause__ = exc
                        request.settle(error=gone)
                    else:
                        request.settle(error=exc)
            if scope.cancelled_caught:
                request.settle(
                    error=CallTimeout(f"server {self.name}: {request.what}: deadline passed")
                )
        finally:
            self._running.discard(request)
            request.settle(
                error=ServerUnavailable(
                    f"server {self.name}: connection lost during {request.what}"
                )
            )
