"""build_http_app(settings) -> the ASGI app: Streamable HTTP at /mcp, GET /healthz,
the protected-resource metadata (RFC 9728); bearer-token auth and slowapi limits."""

from __future__ import annotations

import hmac
import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_server.access.control import AccessControl
from ticket_server.db import open_repository
from ticket_server.metrics import CONTENT_TYPE_LATEST, Metrics
from ticket_server.server import build_server, deprecations
from ticket_server.settings import Settings
from ticket_server.tickets.domain import DatabaseUnavailable

MCP_PATH = "/mcp"
LOOPBACK = ("127.", "::1")


def metrics_allowed(settings: Settings, request: Request) -> bool:
    """GET /metrics: with ``metrics_token`` set, only `Authorization: Bearer <it>`;
    without one, only clients on the loopback interface (a scraper beside the server)."""
    if settings.metrics_token is not None:
        expected = f"Bearer {settings.metrics_token.get_secret_value()}".encode()
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)
    host = request.client.host if request.client else ""
    return host.startswith(LOOPBACK)


def frame_problem(body: bytes) -> str | None:
    """Why a POST body is not one JSON-RPC 2.0 message, or None to let the transport read
    it (JSON-RPC 2.0 sections 4-5: an Invalid Request; MCP has had no batches since
    2025-06-18). Bodies that are not JSON at all are left to the transport's Parse error."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, list):
        return "JSON-RPC batches are not supported; send one message per request"
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return 'expected one JSON-RPC object with "jsonrpc": "2.0"'
    if not {"method", "result", "error"} & message.keys():
        return "expected a request, a notification or a response"
    request_id = message.get("id")
    if "method" in message and "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        return "a request id must be a string or an integer"
    return None


class RequestBodyLimit:
    """ASGI: a request body over ``max_bytes`` is answered 413 with a JSON-RPC error
    (id null), from its Content-Length or as soon as the bytes received pass the limit,
    never reading the rest (the MCP SDK's own limit, 4 MiB, stays behind this one). A
    POST body to the MCP endpoint that is JSON but not one JSON-RPC message gets 400
    with Invalid Request (-32600) here: the SDK would answer -32602 with its validator's
    internals. Only the MCP endpoint speaks JSON-RPC: other paths are left to the router
    (404/405, as a plain web server answers a client probing for OAuth endpoints such as
    `POST /register`). A request to the MCP endpoint without a verified bearer token is
    passed on unread, so it is answered 401 with `WWW-Authenticate` (MCP authorization,
    RFC 6750 section 3) whatever its body; this middleware runs after authentication
    has set ``scope["user"]`` and before the endpoint enforces it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, message: str | None = None) -> None:
        too_large = message is None
        text = f"Request body too large: the limit is {self.max_bytes} bytes" if too_large else f"Invalid Request: {message}"
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}
        response = Response(json.dumps(body), status_code=413 if too_large else 400, media_type="application/json",
                            headers={"Connection": "close"} if too_large else None)
        await response(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        mcp = scope["type"] == "http" and scope["path"] == MCP_PATH
        if scope["type"] != "http" or (mcp and getattr(scope.get("user"), "access_token", None) is None):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received: list[Message] = []
        size = 0
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        if mcp and scope.get("method") == "POST":
            problem = frame_problem(b"".join(m.get("body", b"") for m in received if m["type"] == "http.request"))
            if problem is not None:
                await self._refuse(scope, receive, send, problem)
                return

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)


def create_app():  # -> fastmcp StarletteWithLifespan
    """The app from the environment's settings: the factory each uvicorn worker calls
    (`ticket-server serve --transport http --workers N`)."""
    from ticket_server.logging import configure_logging

    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    return build_http_app(settings)


def build_http_app(settings: Settings):  # -> fastmcp StarletteWithLifespan
    """The whole HTTP surface. Host/Origin validation (DNS-rebinding protection, MCP
    spec "Transports: Security Warning") is always on; loopback names are accepted,
    others only when listed in ``allowed_hosts``/``allowed_origins``."""
    repo = open_repository(settings)
    metrics = Metrics(deprecations(settings))
    access = AccessControl(settings, observers=[metrics.observe_call])
    mcp = build_server(settings, repo, access=access)
    # Every request to /mcp needs a valid bearer token (401 + WWW-Authenticate otherwise).
    mcp.auth = access.token_verifier()

    @mcp.custom_route("/healthz", methods=["GET"], include_in_schema=False)
    async def healthz(_: Request) -> Response:
        try:
            await repo.ping()
        except DatabaseUnavailable:
            return JSONResponse({"status": "unavailable", "database": "unavailable"}, status_code=503)
        return JSONResponse({"status": "ok", "database": "ok"})

    @mcp.custom_route("/metrics", methods=["GET"], include_in_schema=False)
    async def prometheus(request: Request) -> Response:
        if not metrics_allowed(settings, request):
            return JSONResponse({"error": "forbidden"}, status_code=403)
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    from starlette.middleware import Middleware as AsgiMiddleware

    app = mcp.http_app(
        path=MCP_PATH,
        middleware=[AsgiMiddleware(RequestBodyLimit, max_bytes=settings.max_request_bytes),
                    *access.http_middleware()],
        json_response=True,
        stateless_http=settings.stateless_http,
        host_origin_protection=True,
        allowed_hosts=settings.allowed_hosts or None,
        allowed_origins=settings.allowed_origins or None,
    )
    access.install_http(app, MCP_PATH)
    return app


def serve(app, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn until SIGTERM or SIGINT; a graceful stop exits 0.

    uvicorn re-raises a captured SIGTERM once its graceful shutdown (lifespan included:
    the audit trail is flushed there) is done, so the process would die by the signal;
    a supervisor that asked the server to stop expects status 0.
    """
    import signal

    import uvicorn

    class GracefulServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame) -> None:  # type: ignore[no-untyped-def]
            super().handle_exit(sig, frame)
            if sig == signal.SIGTERM and sig in self._captured_signals:
                self._captured_signals.remove(sig)

    config = uvicorn.Config(app, host=host, port=port, log_config=None, timeout_graceful_shutdown=10)
    GracefulServer(config).run()
