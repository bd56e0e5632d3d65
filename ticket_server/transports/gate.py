"""The gate in front of /mcp: ``McpGate`` runs ``McpGate.stages`` in order, cheapest
first, after Host/Origin validation and bearer-token verification (which read headers
only); the first stage that refuses answers, and a request every stage lets through is
served (``forward``):

1. ``one_credential``  more than one ``Authorization`` header or credential, or a token
                       in the URL (``access_token``) beside one: 400;
2. ``token_checked``   a token that could not be checked because the callers table did
                       not answer: 503 with ``Retry-After``, never 401 (which would tell
                       the client to drop its token);
3. ``authenticated``   no valid token: 401, before a byte of the body is read (a request
                       without a token costs almost nothing), or 429 once its client
                       address is past the HTTP limit;
4. ``declared_size``   a declared body over ``max_request_bytes``: 413 from the headers
                       (what is sent after it read and dropped: ``RefusedMidBody``);
5. ``media_type``      an ``Accept`` or ``Content-Type`` no JSON answer fits: 406 / 415;
6. ``read_body``       the caller's HTTP limit counted, then the body read within
                       ``http_read_timeout`` (408) and ``max_request_bytes`` (413);
7. ``parse``           at most ``frames.MAX_MESSAGE_TOKENS`` JSON tokens (413, told
                       before it is parsed), JSON in UTF-8 (400, -32700);
8. ``within_limit``    the caller's HTTP limit: 429 with ``Retry-After`` (and the id);
9. ``well_formed``     one JSON-RPC message (400, -32600), a tools/call with usable
                       params (400, -32602);
then legacy sessions (``sessions.LegacySessions``) or, stateless, the app itself.

Each 4xx, the gate's and those answered past it, waits its turn (its caller's, or its
address's without a valid token: ``access/pacing.py``), so a client that retries at once
is answered at a pace instead of keeping the event loop busy refusing it. Host/Origin validation runs before the gate: its 421 and 403 are not
paced.

Each refusal is a JSON-RPC error body (``refusals.py``); a refused tools/call leaves its
audit record, as the call pipeline's would. A request refused for want of a valid token
is audited whatever it is (its headers name the method when they can; the body is never
read), as a sample: ``AuditWriter.observe_unauthenticated`` records up to a number per
minute and counts the rest, and the ``ticket_server_unauthenticated_requests`` metric
counts every one.

A legacy session opened by a client that declares the elicitation capability (and
accepts ``text/event-stream``) answers in SSE streams, which can carry a confirmation's
question (``compat.stream_sessions_when``); every other answer is one JSON body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import monotonic
from typing import TYPE_CHECKING, Any

import anyio
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_server import compat
from ticket_server.access.audit import storable
from ticket_server.access.callers import Caller
from ticket_server.access.context import CallRecord, Cause, Outcome
from ticket_server.access.identity import caller_from_access_token, unverifiable
from ticket_server.access.ratelimit import HttpLimiter, HttpVerdict
from ticket_server.tools.errors import DATABASE_UNAVAILABLE
from ticket_server.transports import frames
from ticket_server.transports.refusals import (
    HOW_TO_GET_A_TOKEN,
    TOO_MANY_TOKENS,
    UNAUTHORIZED,
    address_key,
    can_ask,
    expects_continue,
    header_call,
    jsonrpc_error,
    malformed,
    media_problem,
    one_credential,
    token_in_url,
    too_large,
    too_many,
    unauthorized,
    unread_tool,
)
from ticket_server.transports.sessions import LegacySessions, SessionQuota

if TYPE_CHECKING:
    from ticket_server.metrics import Metrics
    from ticket_server.server import Runtime

MCP_PATH = "/mcp"


@dataclass
class GateRequest:
    """One request to /mcp as the stages see it: what it sent, and what each found."""

    scope: Scope
    receive: Receive
    headers: dict[str, str]
    access: Any
    """The verified access token (Starlette's ``scope["user"]``), or None."""
    started: float = field(default_factory=monotonic)
    caller: Caller | None = None
    call: tuple[bool, str | None] = (False, None)
    """(is it a tools/call, its tool name), as far as headers, then the body, say."""
    verdict: HttpVerdict | None = None
    received: list[Message] = field(default_factory=list)
    message: Any = None
    request_id: Any = None

    @property
    def post(self) -> bool:
        return bool(self.scope["method"] == "POST")


Stage = Callable[[GateRequest], Awaitable[Response | None]]


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
        self.app, self.runtime, self.metrics, self.limiter = app, runtime, metrics, limiter
        self.sessions = LegacySessions(app, sessions, may_call_any)
        self.metadata_url = metadata_url
        settings = runtime.settings
        self.max_bytes, self.read_timeout = settings.max_request_bytes, settings.http_read_timeout
        self.stateful = not settings.stateless_http
        self.stream = compat.stream_sessions_when()
        self.pace = runtime.pace
        self.stages: tuple[Stage, ...] = (
            self.one_credential,
            self.token_checked,
            self.authenticated,
            self.declared_size,
            self.media_type,
            self.read_body,
            self.parse,
            self.within_limit,
            self.well_formed,
        )

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
        request = GateRequest(scope, receive, headers, access, call=header_call(headers))
        send = self._paced(request, send)
        for stage in self.stages:
            refusal = await stage(request)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.forward(request, send)

    def _paced(self, r: GateRequest, send: Send) -> Send:
        """``send``, but a 4xx (the gate's refusals, and those of the sessions and the SDK
        past it; not a 503, the server's failure) first waits its caller's turn, or
        without a caller its address's (``access/pacing.py``)."""

        async def paced(message: Message) -> None:
            if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
                await self.pace.turn(_pace_key(r))
            await send(message)

        return paced

    # --- the stages, in order -----------------------------------------------------

    async def one_credential(self, r: GateRequest) -> Response | None:
        # The token verifier reads the first header only: served in one order and refused
        # in the other, which a proxy adding its own header could exploit.
        # A token in the URL beside the header is two credentials (RFC 6750 section 2: one
        # method per request); alone, it is no credential (401 below).
        in_url = "authorization" in r.headers and token_in_url(r.scope)
        if not in_url and one_credential(r.scope["headers"]):
            return None
        self.metrics.unauthenticated.labels("400").inc()
        detail = "a token in the URL" if in_url else "more than one credential"
        self._unread(r, Outcome.DENIED, Cause.UNAUTHENTICATED, detail)
        where = " (never in the URL: remove access_token from it)" if in_url else ""
        return jsonrpc_error(
            400,
            UNAUTHORIZED,
            "HTTP 400 Bad Request: send exactly one Authorization header holding one "
            f"bearer token{where}. {HOW_TO_GET_A_TOKEN}",
            headers={
                "WWW-Authenticate": f'Bearer error="invalid_request", '
                f'resource_metadata="{self.metadata_url}"',
                "Connection": "close",
            },
        )

    async def token_checked(self, r: GateRequest) -> Response | None:
        if r.access is None or not unverifiable(r.access):
            return None
        self._unread(r, Outcome.TOOL_ERROR, Cause.CALLERS_UNAVAILABLE)
        return jsonrpc_error(
            503,
            -32603,
            f"Service Unavailable: the bearer token could not be checked. {DATABASE_UNAVAILABLE}",
            headers={"Retry-After": "5"},
        )

    async def authenticated(self, r: GateRequest) -> Response | None:
        r.caller = caller_from_access_token(r.access) if r.access is not None else None
        if r.caller is not None:
            return None
        verdict = await self.limiter.hit(address_key(r.scope))
        if verdict.allowed:
            answer, outcome, cause = (
                unauthorized(r.headers, self.metadata_url),
                Outcome.DENIED,
                Cause.UNAUTHENTICATED,
            )
        else:
            answer = too_many(verdict, None, by_caller=False)
            outcome, cause = Outcome.RATE_LIMITED, Cause.HTTP_LIMIT
        self.metrics.unauthenticated.labels(str(answer.status_code)).inc()
        self._unread(r, outcome, cause)
        return answer

    async def declared_size(self, r: GateRequest) -> Response | None:
        declared = r.headers.get("content-length")
        if declared is None or not declared.isdigit() or int(declared) <= self.max_bytes:
            return None
        self._refused(r, Outcome.TOOL_ERROR, Cause.TOO_LARGE)
        unasked = expects_continue(r.headers)  # no body comes until it is read
        return too_large(self.max_bytes, None if unasked else self.read_timeout)

    async def media_type(self, r: GateRequest) -> Response | None:
        unfit = media_problem(r.headers) if r.post else None
        if unfit is None:
            return None
        self._refused(r, Outcome.TOOL_ERROR, Cause.MALFORMED, unfit[1])
        return jsonrpc_error(unfit[0], -32600, unfit[1], headers={"Connection": "close"})

    async def read_body(self, r: GateRequest) -> Response | None:
        """The request's messages up to the end of its body, within the size and time
        bounds (the caller's HTTP limit counted first, refused once the id is known)."""
        assert r.caller is not None
        r.verdict = await self.limiter.hit(f"caller:{r.caller.name}", r.caller.http_rate_limit)
        size = 0
        try:
            async with asyncio.timeout(self.read_timeout):
                while True:
                    message = await r.receive()
                    r.received.append(message)
                    if message["type"] != "http.request":
                        return None
                    size += len(message.get("body", b""))
                    if size > self.max_bytes:
                        self._refused(r, Outcome.TOOL_ERROR, Cause.TOO_LARGE)
                        more = message.get("more_body", False)
                        return too_large(self.max_bytes, self.read_timeout if more else None)
                    if not message.get("more_body", False):
                        return None
        except TimeoutError:
            self._refused(r, Outcome.TOOL_ERROR, Cause.READ_TIMEOUT)
            return jsonrpc_error(
                408,
                -32600,
                f"Request Timeout: the body was not sent within {self.read_timeout:g} seconds",
                headers={"Connection": "close"},
            )

    async def parse(self, r: GateRequest) -> Response | None:
        if not r.post:
            return None
        body = b"".join(m.get("body", b"") for m in r.received if m["type"] == "http.request")
        if frames.too_many_tokens(body):
            self._refused(r, Outcome.TOOL_ERROR, Cause.TOO_LARGE, TOO_MANY_TOKENS)
            return jsonrpc_error(
                413,
                -32600,
                f"Request body too large: {TOO_MANY_TOKENS}; no request to this server needs "
                "so many",
            )
        r.message, error = frames.parse(body)
        if error is not None:  # the SDK would read NaN and Infinity, not JSON
            self._refused(r, Outcome.TOOL_ERROR, Cause.MALFORMED, error)
            return jsonrpc_error(400, -32700, error)
        message = r.message
        if isinstance(message, dict):
            if message.get("method") == "tools/call":
                params = message.get("params")
                name = params.get("name") if isinstance(params, dict) else None
                r.call = (True, name if isinstance(name, str) else r.call[1])
            request_id = message.get("id")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                r.request_id = request_id
        return None

    async def within_limit(self, r: GateRequest) -> Response | None:
        assert r.verdict is not None
        if r.verdict.allowed:
            return None
        self._refused(r, Outcome.RATE_LIMITED, Cause.HTTP_LIMIT)
        return too_many(r.verdict, r.request_id, by_caller=True)

    async def well_formed(self, r: GateRequest) -> Response | None:
        refusal = malformed(r.message, r.request_id) if r.post else None
        if refusal is None:
            return None
        self._refused(r, Outcome.TOOL_ERROR, Cause.MALFORMED, refusal[1])
        return refusal[0]

    # --- served -------------------------------------------------------------------

    async def forward(self, r: GateRequest, send: Send) -> None:
        """Serve the request: its body (read by the gate) first, then what the client
        sends. A legacy session of a client that can ask the person (elicitation)
        answers in SSE streams, which can carry a confirmation's question; JSON cannot."""
        received = r.received
        reset = self.stream.set(True) if can_ask(r.message, r.headers) else None
        try:
            if self.stateful and _in_a_session(r):
                assert r.caller is not None
                await self.sessions(
                    r.scope,
                    r.receive,
                    received,
                    send,
                    r.headers,
                    r.caller,
                    r.message,
                    r.request_id,
                )
            else:
                await _cancelled_when_gone(self.app, r.scope, received, r.receive, send)
        finally:
            if reset is not None:
                self.stream.reset(reset)

    # --- the audit of a refusal ---------------------------------------------------

    def _refused(
        self, r: GateRequest, outcome: Outcome, cause: Cause, detail: str | None = None
    ) -> None:
        """A caller's refused request: audited when it is a tools/call."""
        if r.call[0]:
            self._record(r, r.caller, r.call[1], outcome, cause, detail)

    def _unread(
        self, r: GateRequest, outcome: Outcome, cause: Cause, detail: str | None = None
    ) -> None:
        """A request refused before the caller is known: audited whatever it is."""
        self._record(r, None, unread_tool(r.headers), outcome, cause, detail)

    def _record(
        self,
        r: GateRequest,
        caller: Caller | None,
        tool: str | None,
        outcome: Outcome,
        cause: Cause,
        detail: str | None,
    ) -> None:
        """The audit record of a request refused here (the pipeline never saw it); one
        without a caller goes to the sample of unauthenticated refusals."""
        version = r.headers.get("mcp-protocol-version")  # as sent: any text, of any length
        record = CallRecord(
            tool=storable(tool or "unknown", 128),
            transport="http",
            caller=caller,
            started=r.started,
            protocol_version=storable(version, 32) if version is not None else None,
        )
        record.fail(outcome, cause, detail)
        record.duration_ms = round((monotonic() - r.started) * 1000, 3)
        if caller is None:
            self.runtime.audit.observe_unauthenticated(record)
        else:
            self.runtime.audit.observe(record)


def _pace_key(r: GateRequest) -> str:
    """Whose turn a refusal waits for: its caller's, or without one its address's."""
    return f"caller:{r.caller.name}" if r.caller is not None else address_key(r.scope)


def _in_a_session(r: GateRequest) -> bool:
    """Whether a legacy session serves the request: one that names a session, a GET or
    DELETE (which must), or the ``initialize`` that opens one. A 2026-07-28 request has
    no session, and neither has a request of a stateless server."""
    if "mcp-session-id" in r.headers or not r.post:
        return True
    return isinstance(r.message, dict) and r.message.get("method") == "initialize"


async def _cancelled_when_gone(
    app: ASGIApp, scope: Scope, received: list[Message], receive: Receive, send: Send
) -> None:
    """Serve a request that has no session: ``received`` (its body, read by the gate)
    first. When its client hangs up before the answer, the request is cancelled here
    (there is no session to send ``notifications/cancelled`` into): its tool call ends,
    audited `cancelled`, instead of running to an answer nobody reads."""
    gone = anyio.Event()

    async def app_receive() -> Message:
        if received:
            return received.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async with anyio.create_task_group() as tasks:

        async def until_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            tasks.cancel_scope.cancel()

        tasks.start_soon(until_gone)
        await app(scope, app_receive, send)
        tasks.cancel_scope.cancel()
