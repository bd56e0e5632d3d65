"""The HTTP transport: ``build_http_app(runtime)`` is the ASGI app: Streamable HTTP at
/mcp, GET /healthz, GET /metrics, the protected-resource metadata (RFC 9728).

Every request to /mcp passes ``McpGate`` (after Host/Origin validation and bearer-token
verification, which read headers only), which decides in this order, cheapest first:

1. no valid token: 401, before a byte of the body is read (a request without a token
   costs almost nothing), or 429 once its client address is past the HTTP limit; a
   token that could not be checked because the callers table did not answer: 503 with
   ``Retry-After``, never 401 (which would tell the client to drop its token);
2. a declared body over ``max_request_bytes``: 413, unread;
3. the body, read within ``http_read_timeout`` (408) and ``max_request_bytes`` (413),
   holding at most ``frames.MAX_MESSAGE_TOKENS`` JSON tokens (413, told before it is
   parsed: the gate and the SDK each parse it on the event loop);
4. the caller's HTTP limit: 429 with ``Retry-After``;
5. a body that is not one JSON-RPC message (400, -32600) or a tools/call with unusable
   params (400, -32602);
6. legacy sessions: only ``initialize`` opens one, only for a caller that may call some
   tool, at most ``sessions_per_caller`` at once (429).

Each refusal is a JSON-RPC error body (with the request's id when it was read); a
refused tools/call leaves its audit record, as the call pipeline's would. A request
refused for want of a valid token is audited whatever it is (its headers name the
method when they can; the body is never read), as a sample: ``AuditWriter.
observe_unauthenticated`` records up to a number per minute and counts the rest, and
the ``ticket_server_unauthenticated_requests`` metric counts every one.

A legacy session opened by a client that declares the elicitation capability (and
accepts ``text/event-stream``) answers in SSE streams, which can carry a confirmation's
question (``compat.stream_sessions_when``); every other answer is one JSON body
(``json_response``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.dispatcher import coerce_request_id
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_server import compat
from ticket_server.access.audit import storable
from ticket_server.access.callers import Caller
from ticket_server.access.context import CallRecord, Cause, Outcome
from ticket_server.access.identity import (
    CallerTokenVerifier,
    build_token_verifier,
    caller_from_access_token,
    unverifiable,
)
from ticket_server.access.ratelimit import HttpLimiter, HttpVerdict
from ticket_server.metrics import CONTENT_TYPE_LATEST, Metrics
from ticket_server.server import Runtime, build_runtime, build_server
from ticket_server.settings import Settings
from ticket_server.tickets.domain import DatabaseUnavailable
from ticket_server.tools.errors import DATABASE_UNAVAILABLE
from ticket_server.transports import frames

if TYPE_CHECKING:
    from fastmcp.server.http import StarletteWithLifespan

MCP_PATH = "/mcp"
LOOPBACK = ("127.", "::1")
# Browser pages served from this machine (the MCP Inspector's web UI, any port).
LOOPBACK_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"
EXPOSED_HEADERS = [
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "WWW-Authenticate",
    "Retry-After",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
]
HOW_TO_GET_A_TOKEN = (
    "Tokens are issued by this server's operator: `ticket-server callers add NAME` makes one, "
    "`ticket-server callers rotate NAME` replaces a lost one. Send it as `Authorization: Bearer <token>`."
)
UNAUTHORIZED = -32001  # JSON-RPC implementation-defined server errors: -32000 to -32099
TOO_MANY_REQUESTS = -32002
# Request line and headers: a JWT and the MCP headers fit many times over.
MAX_HEAD_BYTES = 16 * 1024
TOO_MANY_TOKENS = (
    f"more than {frames.MAX_MESSAGE_TOKENS} JSON tokens (strings, commas, brackets) in one message"
)


def metrics_allowed(settings: Settings, request: Request) -> bool:
    """GET /metrics: with ``metrics_token`` set, only `Authorization: Bearer <it>`;
    without one, only clients on the loopback interface (a scraper beside the server)."""
    if settings.metrics_token is not None:
        expected = f"Bearer {settings.metrics_token.get_secret_value()}".encode()
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)
    host = request.client.host if request.client else ""
    return host.startswith(LOOPBACK)


def params_problem(message: dict[str, Any]) -> str | None:
    """Why a tools/call's params cannot name a tool and its arguments, or None."""
    params = message.get("params")
    if not isinstance(params, dict):
        return "tools/call params must be an object"
    if not isinstance(params.get("name"), str):
        return "tools/call params.name must be a string"
    if params.get("arguments") is not None and not isinstance(params["arguments"], dict):
        return "tools/call params.arguments must be an object"
    return None


def jsonrpc_error(
    status: int,
    code: int,
    message: str,
    request_id: Any = None,
    headers: dict[str, str] | None = None,
    data: Any = None,
) -> Response:
    """An HTTP error answer whose body is a JSON-RPC 2.0 error response."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return Response(
        json.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


class SessionQuota:
    """The legacy sessions each caller holds, as the gate sees them opened (an
    ``initialize`` answered with an ``Mcp-Session-Id``), used and closed (DELETE, or a
    404 for a session the server has forgotten). A session with no request in flight
    for ``idle_seconds`` is gone, as the MCP SDK's session manager ends it then."""

    def __init__(self, per_caller: int, idle_seconds: float) -> None:
        self.per_caller, self.idle_seconds = per_caller, idle_seconds
        self.sessions: dict[
            str, dict[str, list[float]]
        ] = {}  # caller -> id -> [last seen, in flight]
        self.ids: dict[str, set[str]] = {}  # session id -> request ids in flight

    def open_count(self, caller: str) -> int:
        held = self.sessions.get(caller, {})
        cutoff = monotonic() - self.idle_seconds
        for sid in [sid for sid, (seen, busy) in held.items() if not busy and seen < cutoff]:
            del held[sid]
        if not held:
            self.sessions.pop(caller, None)
        return len(held)

    def opened(self, caller: str, sid: str) -> None:
        self.sessions.setdefault(caller, {})[sid] = [monotonic(), 0]

    def claim(self, sid: str, key: str) -> bool:
        """Hold request id ``key`` in session ``sid`` until ``release``; False when a
        request in flight holds it already."""
        held = self.ids.setdefault(sid, set())
        if key in held:
            return False
        held.add(key)
        return True

    def release(self, sid: str, key: str) -> None:
        held = self.ids.get(sid)
        if held is not None:
            held.discard(key)
            if not held:
                del self.ids[sid]

    def begin(self, caller: str, sid: str) -> None:
        entry = self.sessions.get(caller, {}).get(sid)
        if entry is not None:
            entry[0], entry[1] = monotonic(), entry[1] + 1

    def end(self, caller: str, sid: str, closed: bool) -> None:
        held = self.sessions.get(caller, {})
        entry = held.get(sid)
        if entry is None:
            return
        if closed:
            del held[sid]
        else:
            entry[0], entry[1] = monotonic(), entry[1] - 1


class BodyRefused(Exception):
    def __init__(self, response: Response, cause: Cause) -> None:
        self.response, self.cause = response, cause


class McpGate:
    """ASGI, for /mcp: the checks listed in this module's docstring, in that order."""

    def __init__(
        self,
        app: ASGIApp,
        runtime: Runtime,
        metrics: Metrics,
        limiter: HttpLimiter,
        sessions: SessionQuota,
        may_call_any: Callable[[Caller], Awaitable[bool]],
        metadata_url: str,
    ) -> None:
        self.app, self.runtime, self.metrics, self.limiter, self.sessions = (
            app,
            runtime,
            metrics,
            limiter,
            sessions,
        )
        self.may_call_any = may_call_any
        self.metadata_url = metadata_url
        settings = runtime.settings
        self.max_bytes, self.read_timeout = settings.max_request_bytes, settings.http_read_timeout
        self.stateful = not settings.stateless_http
        self.stream = compat.stream_sessions_when()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"].rstrip("/") != MCP_PATH
            or scope["method"] == "OPTIONS"
        ):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        access = getattr(scope.get("user"), "access_token", None)
        started = monotonic()
        if not _one_credential(scope["headers"]):
            # The token verifier reads the first header only: served in one order and
            # refused in the other, which a proxy adding its own header could exploit.
            self.metrics.unauthenticated.labels("400").inc()
            self._record(
                headers,
                None,
                _unread_tool(headers),
                Outcome.DENIED,
                Cause.UNAUTHENTICATED,
                "more than one credential",
                started,
            )
            await jsonrpc_error(
                400,
                UNAUTHORIZED,
                "HTTP 400 Bad Request: send exactly one Authorization header holding one "
                f"bearer token. {HOW_TO_GET_A_TOKEN}",
                headers={
                    "WWW-Authenticate": f'Bearer error="invalid_request", '
                    f'resource_metadata="{self.metadata_url}"',
                    "Connection": "close",
                },
            )(scope, receive, send)
            return
        if access is not None and unverifiable(access):
            self._record(
                headers,
                None,
                _unread_tool(headers),
                Outcome.TOOL_ERROR,
                Cause.CALLERS_UNAVAILABLE,
                None,
                started,
            )
            await jsonrpc_error(
                503,
                -32603,
                f"Service Unavailable: the bearer token could not be checked. "
                f"{DATABASE_UNAVAILABLE}",
                headers={"Retry-After": "5"},
            )(scope, receive, send)
            return
        caller = caller_from_access_token(access) if access is not None else None
        call = _header_call(headers)  # (is it a tools/call, its tool name) as far as headers say

        def record(outcome: Outcome, cause: Cause, detail: str | None = None) -> None:
            if call[0]:
                self._record(headers, caller, call[1], outcome, cause, detail, started)

        if caller is None:
            verdict = await self.limiter.hit(address_key(scope))
            if verdict.allowed:
                answer, outcome, cause = (
                    self._unauthorized(headers),
                    Outcome.DENIED,
                    Cause.UNAUTHENTICATED,
                )
            else:
                answer, outcome, cause = (
                    self._too_many(verdict, None),
                    Outcome.RATE_LIMITED,
                    Cause.HTTP_LIMIT,
                )
            self.metrics.unauthenticated.labels(str(answer.status_code)).inc()
            self._record(headers, None, _unread_tool(headers), outcome, cause, None, started)
            await answer(scope, receive, send)
            return

        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            record(Outcome.TOOL_ERROR, Cause.TOO_LARGE)
            await self._too_large()(scope, receive, send)
            return
        unfit = media_problem(headers) if scope["method"] == "POST" else None
        if unfit is not None:
            record(Outcome.TOOL_ERROR, Cause.MALFORMED, unfit[1])
            await jsonrpc_error(unfit[0], -32600, unfit[1], headers={"Connection": "close"})(
                scope, receive, send
            )
            return
        verdict = await self.limiter.hit(f"caller:{caller.name}", caller.http_rate_limit)
        try:
            received = await self._read_body(receive)
        except BodyRefused as refused:
            record(Outcome.TOOL_ERROR, refused.cause)
            await refused.response(scope, receive, send)
            return
        message: Any = None
        parse_error: str | None = None
        if scope["method"] == "POST":
            body = b"".join(m.get("body", b"") for m in received if m["type"] == "http.request")
            if frames.too_many_tokens(body):
                record(Outcome.TOOL_ERROR, Cause.TOO_LARGE, TOO_MANY_TOKENS)
                await jsonrpc_error(
                    413,
                    -32600,
                    f"Request body too large: {TOO_MANY_TOKENS}; no request to this "
                    "server needs so many",
                )(scope, receive, send)
                return
            message, parse_error = frames.parse(body)
            if parse_error == frames.NOT_UTF8:
                record(Outcome.TOOL_ERROR, Cause.MALFORMED, parse_error)
                await jsonrpc_error(400, -32700, parse_error)(scope, receive, send)
                return
            if isinstance(message, dict) and message.get("method") == "tools/call":
                name = (
                    (message.get("params") or {}).get("name")
                    if isinstance(message.get("params"), dict)
                    else None
                )
                call = (True, name if isinstance(name, str) else call[1])
        request_id = message.get("id") if isinstance(message, dict) else None
        request_id = (
            request_id
            if isinstance(request_id, str | int) and not isinstance(request_id, bool)
            else None
        )

        if not verdict.allowed:
            record(Outcome.RATE_LIMITED, Cause.HTTP_LIMIT)
            await self._too_many(verdict, request_id, caller)(scope, receive, send)
            return
        if scope["method"] == "POST":
            refusal = None if parse_error is not None else self._malformed(message, request_id)
            if refusal is not None:
                record(Outcome.TOOL_ERROR, Cause.MALFORMED, refusal[1])
                await refusal[0](scope, receive, send)
                return

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        # A legacy session of a client that can ask the person (elicitation) answers in
        # SSE streams, which can carry a confirmation's question; JSON cannot.
        reset = self.stream.set(True) if _can_ask(message, headers) else None
        try:
            if not self.stateful:
                await self.app(scope, replay, send)
                return
            await self._with_session(
                scope, receive, received, send, headers, caller, message, request_id
            )
        finally:
            if reset is not None:
                self.stream.reset(reset)

    # --- legacy sessions -------------------------------------------------------

    async def _with_session(
        self,
        scope: Scope,
        receive: Receive,
        received: list[Message],
        send: Send,
        headers: dict[str, str],
        caller: Caller,
        message: Any,
        request_id: Any,
    ) -> None:
        """``received``: the request's messages read so far (its body), given to the app
        before anything ``receive`` brings."""
        sid = headers.get("mcp-session-id")
        if sid is None and scope["method"] in ("GET", "DELETE"):
            # Only initialize opens a session; the SDK would open one for this request too.
            await jsonrpc_error(
                400,
                -32600,
                f"Bad Request: {scope['method']} /mcp needs the Mcp-Session-Id "
                "header that the answer to initialize carried",
            )(scope, receive, send)
            return
        opening = (
            sid is None and isinstance(message, dict) and message.get("method") == "initialize"
        )
        if opening:
            if not await self.may_call_any(caller):
                await jsonrpc_error(
                    403,
                    UNAUTHORIZED,
                    "Forbidden: this caller's scopes allow no tool on this "
                    "server, so no session is opened. An operator grants scopes with "
                    "`ticket-server callers add|rotate`.",
                    request_id,
                )(scope, receive, send)
                return
            if self.sessions.open_count(caller.name) >= self.sessions.per_caller:
                wait = max(1, round(self.sessions.idle_seconds))
                await jsonrpc_error(
                    429,
                    TOO_MANY_REQUESTS,
                    f"Too many open sessions: this caller may hold {self.sessions.per_caller} at once. Close one "
                    f"(DELETE /mcp with its Mcp-Session-Id) or let an idle one expire (within {wait} seconds).",
                    request_id,
                    headers={"Retry-After": str(wait)},
                    data={"retry_after_seconds": wait},
                )(scope, receive, send)
                return
        elif sid is not None:
            # A request id is the session's until its answer: the transport keys each
            # request's answer by it, so a second request with an id in flight would
            # take the first one's answer and leave the first waiting for ever.
            key = _id_key(message) if scope["method"] == "POST" else None
            if key is not None and not self.sessions.claim(sid, key):
                await jsonrpc_error(
                    400,
                    -32600,
                    f"Invalid Request: the id {_shown_id(request_id)} is already in use by a "
                    "request of this session that has not been answered; send each request "
                    "with a new id",
                    request_id,
                )(scope, _no_more_body, send)
                return
            self.sessions.begin(caller.name, sid)
        status, finished = 0, False

        async def watch(message: Message) -> None:
            nonlocal status, finished
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            if message["type"] == "http.response.start":
                status = message["status"]
                if opening and status == 200:
                    for key, value in message.get("headers", []):
                        if key.lower() == b"mcp-session-id":
                            self.sessions.opened(caller.name, value.decode("latin-1"))
            await send(message)

        gone = anyio.Event()

        async def app_receive() -> Message:
            if received:
                return received.pop(0)
            await gone.wait()
            return {"type": "http.disconnect"}

        async def until_gone() -> None:
            """The client closing its connection before its answer: the request is
            cancelled in its session, as a ``notifications/cancelled`` would, so its
            task ends instead of running to an answer nobody reads."""
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            if not finished and sid is not None and _id_key(message) is not None:
                await self._cancel(scope, request_id)

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(until_gone)
                await self.app(scope, app_receive, watch)
                tasks.cancel_scope.cancel()
            if status and not finished and not gone.is_set():
                # An SSE stream the server ended at shutdown: close it as a complete response.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if sid is not None:
                closed = status == 404 or (scope["method"] == "DELETE" and 200 <= status < 300)
                self.sessions.end(caller.name, sid, closed)
                key = _id_key(message) if scope["method"] == "POST" and not opening else None
                if key is not None:
                    self.sessions.release(sid, key)

    async def _cancel(self, scope: Scope, request_id: Any) -> None:
        """Send the app, in the request's session, the ``notifications/cancelled`` its
        client would have sent; the answer (202) goes nowhere."""
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "the client closed the connection"},
            }
        ).encode()
        replaced = {b"content-length", b"content-type", b"accept"}
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in replaced] + [
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ]
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(_: Message) -> None:
            pass

        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self.app({**scope, "headers": headers}, receive, discard)

    # --- refusals ---------------------------------------------------------------

    async def _read_body(self, receive: Receive) -> list[Message]:
        """The request's messages up to the end of its body, within the size and time bounds."""
        received: list[Message] = []
        size = 0
        try:
            async with asyncio.timeout(self.read_timeout):
                while True:
                    message = await receive()
                    received.append(message)
                    if message["type"] != "http.request":
                        return received
                    size += len(message.get("body", b""))
                    if size > self.max_bytes:
                        raise BodyRefused(self._too_large(), Cause.TOO_LARGE)
                    if not message.get("more_body", False):
                        return received
        except TimeoutError:
            raise BodyRefused(
                jsonrpc_error(
                    408,
                    -32600,
                    f"Request Timeout: the body was not sent within {self.read_timeout:g} seconds",
                    headers={"Connection": "close"},
                ),
                Cause.READ_TIMEOUT,
            ) from None

    def _too_large(self) -> Response:
        return jsonrpc_error(
            413,
            -32600,
            f"Request body too large: the limit is {self.max_bytes} bytes",
            headers={"Connection": "close"},
        )

    @staticmethod
    def _malformed(message: Any, request_id: Any) -> tuple[Response, str] | None:
        """400 for a body that is JSON but not one JSON-RPC message (the SDK would answer
        -32602 with its validator's internals), or a tools/call whose params name no tool.
        Bodies that are not JSON at all are left to the transport's Parse error."""
        problem = frames.problem(message)
        if problem is not None:
            return jsonrpc_error(400, -32600, f"Invalid Request: {problem}"), problem
        if message.get("method") == "tools/call" and "id" in message:
            problem = params_problem(message)
            if problem is not None:
                return jsonrpc_error(400, -32602, f"Invalid params: {problem}", request_id), problem
        return None

    def _unauthorized(self, headers: dict[str, str]) -> Response:
        """401 (RFC 6750 section 3): the challenge names the RFC 9728 metadata; a token that
        was sent and refused also gets ``error="invalid_token"``."""
        given = headers.get("authorization", "")[:7].lower() == "bearer "
        if given:
            text = f"HTTP 401 Unauthorized: the bearer token is unknown or revoked. {HOW_TO_GET_A_TOKEN}"
            challenge = (
                f'Bearer error="invalid_token", error_description="The bearer token is unknown or '
                f'revoked", resource_metadata="{self.metadata_url}"'
            )
        else:
            text = f"HTTP 401 Unauthorized: this server needs a bearer token. {HOW_TO_GET_A_TOKEN}"
            challenge = f'Bearer resource_metadata="{self.metadata_url}"'
        # Connection: close: the body is never read, and a kept-alive connection would
        # have to read it all (a gigabyte, if the client says so) before the next request.
        return jsonrpc_error(
            401,
            UNAUTHORIZED,
            text,
            headers={"WWW-Authenticate": challenge, "Connection": "close"},
        )

    @staticmethod
    def _too_many(verdict: HttpVerdict, request_id: Any, caller: Caller | None = None) -> Response:
        who = (
            "this caller" if caller is not None else "a client without a valid token, per address,"
        )
        text = (
            f"Too many requests: {who} may send {verdict.limit} requests per window of the HTTP limit; "
            f"nothing was done; retry in {verdict.reset_seconds} seconds."
        )
        # Without a caller the body was not read: close rather than read it (as for 401).
        extra = {"Connection": "close"} if caller is None else {}
        return jsonrpc_error(
            429,
            TOO_MANY_REQUESTS,
            text,
            request_id,
            headers={**verdict.headers(), **extra},
            data={"retry_after_seconds": verdict.reset_seconds},
        )

    def _record(
        self,
        headers: dict[str, str],
        caller: Caller | None,
        tool: str | None,
        outcome: Outcome,
        cause: Cause,
        detail: str | None,
        started: float,
    ) -> None:
        """The audit record of a request refused here (the pipeline never saw it); one
        without a caller goes to the sample of unauthenticated refusals."""
        version = headers.get("mcp-protocol-version")  # as sent: any text, of any length
        record = CallRecord(
            tool=storable(tool or "unknown", 128),
            transport="http",
            caller=caller,
            started=started,
            protocol_version=storable(version, 32) if version is not None else None,
        )
        record.fail(outcome, cause, detail)
        record.duration_ms = round((monotonic() - started) * 1000, 3)
        if caller is None:
            self.runtime.audit.observe_unauthenticated(record)
        else:
            self.runtime.audit.observe(record)


class NamedMisdirection:
    """ASGI, outermost: the 421 that Host validation answers for a ``Host`` this server
    does not answer to (FastMCP's guard says only "Misdirected Request") becomes a
    JSON-RPC error naming the setting that admits it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        misdirected = False

        async def named(message: Message) -> None:
            nonlocal misdirected
            if message["type"] == "http.response.start" and message["status"] == 421:
                misdirected = True
                return
            if not misdirected:
                await send(message)
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                host = storable(_header(scope, b"host"), 100)
                await jsonrpc_error(
                    421,
                    -32600,
                    f"Misdirected Request: this server does not answer to the Host {host!r}. "
                    "An operator who wants it to adds the name to TICKET_SERVER_ALLOWED_HOSTS "
                    """(a JSON list, e.g. '["tickets.example.com"]').""",
                )(scope, receive, send)

        await self.app(scope, receive, named)


class RefusalSample(logging.Filter):
    """uvicorn's access log (``uvicorn.access``) keeps every answered request under 400
    and up to ``per_minute`` refusals (400 and above) each minute, as the audit samples
    the requests refused without a token: a flood must not fill the log."""

    def __init__(self, per_minute: int = 60) -> None:
        super().__init__()
        self.per_minute = per_minute
        self.minute, self.logged, self.dropped = monotonic(), 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        status = args[4] if isinstance(args, tuple) and len(args) == 5 else None
        if not isinstance(status, int) or status < 400:
            return True
        now = monotonic()
        if now - self.minute >= 60:
            if self.dropped:
                record.msg = f"{record.msg} ({self.dropped} earlier refusals not logged)"
            self.minute, self.logged, self.dropped = now, 0, 0
        if self.logged < self.per_minute:
            self.logged += 1
            return True
        self.dropped += 1
        return False


def sample_refusals_in_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RefusalSample) for f in access.filters):
        access.addFilter(RefusalSample())


UNREAD = "(request not read)"
"""The audit's tool for a request refused before its body was read, whose headers do not
say what it is (the legacy revision has no ``Mcp-Method`` header)."""


def _unread_tool(headers: dict[str, str]) -> str:
    """What a request refused unread is, as far as its headers say: the tool of a
    tools/call, ``(method)`` for another method, or ``UNREAD``."""
    method, name = headers.get("mcp-method"), headers.get("mcp-name")
    if method == "tools/call":
        return name or "unknown"
    return f"({method})" if method else UNREAD


def media_problem(headers: dict[str, str]) -> tuple[int, str] | None:
    """(406 or 415, why) for a POST whose ``Accept`` admits no JSON answer or whose
    body is not declared ``application/json`` in UTF-8; None when both are fine."""
    accepted = [part.split(";")[0].strip().lower() for part in headers.get("accept", "").split(",")]
    if not {"application/json", "application/*", "*/*"} & set(accepted):
        return 406, (
            "Not Acceptable: this server answers POST /mcp with application/json (or "
            "text/event-stream); send `Accept: application/json, text/event-stream`"
        )
    media, *parameters = headers.get("content-type", "").split(";")
    charset = next(
        (
            p.split("=", 1)[1].strip().strip('"').lower()
            for p in parameters
            if "=" in p and p.split("=", 1)[0].strip().lower() == "charset"
        ),
        "utf-8",
    )
    if media.strip().lower() != "application/json" or charset not in ("utf-8", "utf8"):
        return 415, (
            "Unsupported Media Type: the body of POST /mcp must be JSON in UTF-8, sent "
            "with `Content-Type: application/json`"
        )
    return None


def address_key(scope: Scope) -> str:
    """The HTTP limiter's key of a request without a valid token: its client address
    (the socket's, unless a configured proxy said otherwise: ``proxy_options``)."""
    return f"address:{scope['client'][0] if scope.get('client') else 'unknown'}"


def _one_credential(raw: list[tuple[bytes, bytes]]) -> bool:
    """At most one ``Authorization`` header, holding at most one credential (a scheme
    and one token: RFC 7235's token68 has no comma or space)."""
    values = [value for key, value in raw if key.lower() == b"authorization"]
    return len(values) <= 1 and all(
        b"," not in value and len(value.split()) <= 2 for value in values
    )


def _id_key(message: Any) -> str | None:
    """The key of a request's id as the MCP SDK correlates ids (``7`` and ``"7"`` are
    one), or None for a message that is not a request."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return str(coerce_request_id(request_id))


def _shown_id(request_id: Any) -> str:
    text = repr(request_id)
    return text if len(text) <= 40 else text[:37] + "..."


async def _no_more_body() -> Message:
    return {"type": "http.disconnect"}


def _header(scope: Scope, name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == name), "")


def _can_ask(message: Any, headers: dict[str, str]) -> bool:
    """Whether ``message`` is a legacy ``initialize`` of a client that declares the
    elicitation capability and accepts SSE: its session answers in SSE streams."""
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return False
    params = message.get("params")
    capabilities = params.get("capabilities") if isinstance(params, dict) else None
    return (
        isinstance(capabilities, dict)
        and capabilities.get("elicitation") is not None
        and "text/event-stream" in headers.get("accept", "")
    )


def _header_call(headers: dict[str, str]) -> tuple[bool, str | None]:
    """Whether the 2026-07-28 routing headers (``Mcp-Method``, ``Mcp-Name``) say tools/call."""
    return headers.get("mcp-method") == "tools/call", headers.get("mcp-name")


def create_app() -> StarletteWithLifespan:
    """The app from the environment's settings: the factory each uvicorn worker calls
    (`ticket-server serve --transport http --workers N`, see ``export_to_workers``)."""
    from ticket_server.logging import configure_logging

    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    return build_http_app(build_runtime(settings))


def export_to_workers(settings: Settings) -> None:
    """Hand the serving settings to uvicorn's worker processes: each is a new process
    that builds its app from the environment (``create_app``), so the values the command
    line decided (host, port, stateless sessions) go there. Legacy sessions cannot live
    in one worker's memory, so several workers always serve them stateless."""
    import os

    os.environ.update(
        {
            "TICKET_SERVER_HOST": settings.host,
            "TICKET_SERVER_PORT": str(settings.port),
            "TICKET_SERVER_STATELESS_HTTP": "true",
        }
    )


def build_http_app(runtime: Runtime) -> StarletteWithLifespan:
    """The whole HTTP surface on ``runtime``. Host/Origin validation (DNS-rebinding
    protection, MCP spec "Transports: Security Warning") is always on; loopback names are
    accepted, others only when listed in ``allowed_hosts``/``allowed_origins``. CORS
    answers browser pages from those origins (the MCP Inspector's web UI included)."""
    from fastmcp.server.dependencies import get_http_request
    from mcp.server.auth.routes import build_resource_metadata_url
    from starlette.middleware import Middleware as AsgiMiddleware
    from starlette.middleware.cors import CORSMiddleware

    from ticket_server.pipeline import required_scopes

    settings = runtime.settings
    metrics = runtime.metrics
    if metrics is None:
        raise ValueError("an HTTP server exposes its metrics: build its runtime with metrics=True")
    mcp = build_server(runtime)
    limiter = HttpLimiter(settings)
    compat.stream_sessions_when()
    # Every request to /mcp needs a valid bearer token (401 + WWW-Authenticate otherwise).
    verifier = build_token_verifier(settings, runtime.callers)
    if isinstance(verifier, CallerTokenVerifier):

        async def may_look_up() -> bool:
            """A token the cache does not know is looked up only while its client
            address may still be refused one by one (401): past its limit it gets 429
            anyway, so a flood of random tokens costs no query."""
            request = get_http_request()
            return not await limiter.exhausted(address_key(request.scope))

        verifier.may_look_up = may_look_up
    mcp.auth = verifier
    metadata_url = str(
        build_resource_metadata_url(AnyHttpUrl(settings.base_url.rstrip("/") + MCP_PATH))
    )
    tool_scopes: list[frozenset[str]] = []

    async def may_call_any(caller: Caller) -> bool:
        if not tool_scopes:
            tool_scopes.extend(
                required_scopes(t) for t in await mcp.list_tools(run_middleware=False)
            )
        return any(needed and needed <= caller.scopes for needed in tool_scopes)

    @mcp.custom_route("/healthz", methods=["GET"], include_in_schema=False)
    async def healthz(_: Request) -> Response:
        try:
            await runtime.repository.ping()
        except DatabaseUnavailable:
            return JSONResponse(
                {"status": "unavailable", "database": "unavailable"}, status_code=503
            )
        return JSONResponse({"status": "ok", "database": "ok"})

    @mcp.custom_route("/metrics", methods=["GET"], include_in_schema=False)
    async def prometheus(request: Request) -> Response:
        if not metrics_allowed(settings, request):
            return JSONResponse({"error": "forbidden"}, status_code=403)
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app = mcp.http_app(
        path=MCP_PATH,
        middleware=[
            AsgiMiddleware(
                CORSMiddleware,
                allow_origins=settings.allowed_origins,
                allow_origin_regex=LOOPBACK_ORIGINS,
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["*"],
                expose_headers=EXPOSED_HEADERS,
            ),
            AsgiMiddleware(
                McpGate,
                runtime=runtime,
                metrics=metrics,
                limiter=limiter,
                metadata_url=metadata_url,
                sessions=SessionQuota(settings.sessions_per_caller, settings.session_idle_timeout),
                may_call_any=may_call_any,
            ),
        ],
        json_response=True,
        stateless_http=settings.stateless_http,
        session_idle_timeout=settings.session_idle_timeout,
        host_origin_protection=True,
        allowed_hosts=settings.allowed_hosts or None,
        allowed_origins=settings.allowed_origins or None,
    )
    app.add_middleware(NamedMisdirection)
    sample_refusals_in_access_log()
    return app


# For `--workers N` (``uvicorn.run`` with a factory): each worker process imports its
# protocol by name, since a class made in the parent cannot be handed over.
WORKER_OPTIONS: dict[str, Any] = {
    "server_header": False,
    "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
    "http": f"{__name__}:worker_h11_protocol",
}


def __getattr__(name: str) -> Any:
    """``worker_h11_protocol``: uvicorn's h11 protocol with the header deadline of the
    environment's settings (``WORKER_OPTIONS``)."""
    if name == "worker_h11_protocol":
        return compat.h11_with_header_deadline(Settings().http_read_timeout)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def worker_options(settings: Settings) -> dict[str, Any]:
    """``WORKER_OPTIONS`` and the proxy-header options (``serve`` says why) for
    ``uvicorn.run`` with ``--workers N``."""
    proxies = settings.forwarded_allow_ips
    return {**WORKER_OPTIONS, "proxy_headers": bool(proxies), "forwarded_allow_ips": proxies}


def serve(app: ASGIApp, settings: Settings) -> None:
    """Serve ``app`` with uvicorn until SIGTERM or SIGINT; a graceful stop (the lifespan,
    with the audit trail's flush, included) exits 0. A connection that has not sent a
    request's headers within ``http_read_timeout`` seconds is closed (slowloris), and no
    answer announces the server software. X-Forwarded-* are read only from the proxies
    ``forwarded_allow_ips`` names (empty: none): uvicorn's default
    trusts loopback, so any local process, or a local proxy passing the header on, could
    pick the client address the per-address limit and /metrics see."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        timeout_graceful_shutdown=10,
        server_header=False,
        http=compat.h11_with_header_deadline(settings.http_read_timeout),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=settings.forwarded_allow_ips,
    )
    compat.graceful_uvicorn_server(config).run()
