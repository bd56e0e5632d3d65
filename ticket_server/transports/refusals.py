"""What the HTTP gate answers when it refuses a request to /mcp: each refusal a JSON-RPC
error body (with the request's id when it was read), and the checks on headers and
bodies that decide them, each a plain function of what the request sent."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import unquote_to_bytes

from mcp.shared.dispatcher import coerce_request_id
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ticket_server.access.ratelimit import HttpVerdict
from ticket_server.pipeline import params_problem
from ticket_server.transports import frames

HOW_TO_GET_A_TOKEN = (
    "Tokens are issued by this server's operator: `ticket-server callers add NAME` makes one, "
    "`ticket-server callers rotate NAME` replaces a lost one. Send it as `Authorization: Bearer <token>`."
)
UNAUTHORIZED = -32001  # JSON-RPC implementation-defined server errors: -32000 to -32099
TOO_MANY_REQUESTS = -32002


TOO_MANY_TOKENS = (
    f"more than {frames.MAX_MESSAGE_TOKENS} JSON tokens (strings, commas, brackets) in one message"
)


UNREAD = "(request not read)"
"""The audit's tool for a request refused before its body was read, whose headers do not
say what it is (the legacy revision has no ``Mcp-Method`` header)."""


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


def unread_tool(headers: dict[str, str]) -> str:
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


def one_credential(raw: list[tuple[bytes, bytes]]) -> bool:
    """At most one ``Authorization`` header, holding at most one credential (a scheme
    and one token: RFC 7235's token68 has no comma or space)."""
    values = [value for key, value in raw if key.lower() == b"authorization"]
    return len(values) <= 1 and all(
        b"," not in value and len(value.split()) <= 2 for value in values
    )


def token_in_url(scope: Scope) -> bool:
    """Whether the request's query string carries ``access_token`` (RFC 6750 section 2.3's
    URI query parameter), which MCP's authorization forbids ("Access tokens MUST NOT be
    included in the URI query string"): a URL is logged and cached where a header is not."""
    query = scope.get("query_string", b"")
    return any(  # the name as a URL parser reads it: access%5Ftoken is access_token
        unquote_to_bytes(part.split(b"=", 1)[0].replace(b"+", b" ")).lower() == b"access_token"
        for part in query.split(b"&")
        if part
    )


def id_key(message: Any) -> str | None:
    """The key of a request's id as the MCP SDK correlates ids (``7`` and ``"7"`` are
    one), or None for a message that is not a request."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return str(coerce_request_id(request_id))


def shown_id(request_id: Any) -> str:
    text = repr(request_id)
    return text if len(text) <= 40 else text[:37] + "..."


async def no_more_body() -> Message:
    return {"type": "http.disconnect"}


def can_ask(message: Any, headers: dict[str, str]) -> bool:
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


def header_call(headers: dict[str, str]) -> tuple[bool, str | None]:
    """Whether the 2026-07-28 routing headers (``Mcp-Method``, ``Mcp-Name``) say tools/call."""
    return headers.get("mcp-method") == "tools/call", headers.get("mcp-name")


def unauthorized(headers: dict[str, str], metadata_url: str) -> Response:
    """401 (RFC 6750 section 3): the challenge names the RFC 9728 metadata; a token that
    was sent and refused also gets ``error="invalid_token"``."""
    given = headers.get("authorization", "")[:7].lower() == "bearer "
    if given:
        text = (
            f"HTTP 401 Unauthorized: the bearer token is unknown or revoked. {HOW_TO_GET_A_TOKEN}"
        )
        challenge = (
            f'Bearer error="invalid_token", error_description="The bearer token is unknown or '
            f'revoked", resource_metadata="{metadata_url}"'
        )
    else:
        text = f"HTTP 401 Unauthorized: this server needs a bearer token. {HOW_TO_GET_A_TOKEN}"
        challenge = f'Bearer resource_metadata="{metadata_url}"'
    # Connection: close: the body is never read, and a kept-alive connection would
    # have to read it all (a gigabyte, if the client says so) before the next request.
    return jsonrpc_error(
        401,
        UNAUTHORIZED,
        text,
        headers={"WWW-Authenticate": challenge, "Connection": "close"},
    )


def too_many(verdict: HttpVerdict, request_id: Any, by_caller: bool) -> Response:
    """429 with ``Retry-After``: the caller's HTTP limit, or (``by_caller`` False) the
    per-address limit of clients without a valid token, whose body was never read."""
    who = "this caller" if by_caller else "a client without a valid token, per address,"
    text = (
        f"Too many requests: {who} may send {verdict.limit} requests per window of the HTTP limit; "
        f"nothing was done; retry in {verdict.reset_seconds} seconds."
    )
    # Without a caller the body was not read: close rather than read it (as for 401).
    extra = {"Connection": "close"} if not by_caller else {}
    return jsonrpc_error(
        429,
        TOO_MANY_REQUESTS,
        text,
        request_id,
        headers={**verdict.headers(), **extra},
        data={"retry_after_seconds": verdict.reset_seconds},
    )


DISCARD_AT_MOST = 64 * 1024 * 1024
"""Bytes of a refused body read and dropped before the connection is closed anyway."""


class RefusedMidBody(Response):
    """``answer``, sent before the request's body is all read: its status, headers and
    body go out at once, then what the client still sends of its body is read and dropped,
    for at most ``seconds`` and ``DISCARD_AT_MOST`` bytes, before the connection is closed.
    Closing a TCP connection with bytes unread makes the kernel reset it, which can destroy
    the answer before the client reads it; RFC 9112 section 9.6 asks a server to go on
    reading a while."""

    def __init__(self, answer: Response, seconds: float) -> None:
        super().__init__(answer.body, answer.status_code)
        self.raw_headers, self.seconds = answer.raw_headers, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        dropped = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.seconds):
                while dropped <= DISCARD_AT_MOST:
                    message = await receive()
                    if message["type"] != "http.request" or not message.get("more_body"):
                        break
                    dropped += len(message.get("body", b""))
        await send({"type": "http.response.body", "body": b""})


def too_large(max_bytes: int, drop_for: float | None = None) -> Response:
    """413 for a body over ``max_bytes``. ``drop_for``: seconds to read and drop the rest
    of a body still arriving (``RefusedMidBody``); None when none is: the body has ended,
    or the client sent ``Expect: 100-continue`` and was never asked for it."""
    answer = jsonrpc_error(
        413,
        -32600,
        f"Request body too large: the limit is {max_bytes} bytes",
        headers={"Connection": "close"},
    )
    return answer if drop_for is None else RefusedMidBody(answer, drop_for)


def expects_continue(headers: dict[str, str]) -> bool:
    """Whether the client waits for ``100 Continue`` before it sends its body (RFC 9110
    section 10.1.1), which the server sends only when the body is first read."""
    return headers.get("expect", "").strip().lower() == "100-continue"


def malformed(message: Any, request_id: Any) -> tuple[Response, str] | None:
    """400 for a body that is JSON but not one JSON-RPC message (the SDK would answer
    -32602 with its validator's internals), or a tools/call whose params name no tool.
    Bodies that are not JSON at all are left to the transport's Parse error."""
    problem = frames.problem(message)
    if problem is not None:
        return jsonrpc_error(400, -32600, f"Invalid Request: {problem}"), problem
    if message.get("method") == "tools/call" and "id" in message:
        problem = params_problem("tools/call", message.get("params"))
        if problem is not None:
            return jsonrpc_error(400, -32602, f"Invalid params: {problem}", request_id), problem
    return None
