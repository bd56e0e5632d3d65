"""The HTTP transport: ``build_http_app(runtime)`` is the ASGI app: Streamable HTTP at
/mcp, GET /healthz, GET /metrics, the protected-resource metadata (RFC 9728); bearer-token
auth, the request body bound and the per-caller HTTP limit (slowapi)."""

from __future__ import annotations

import hmac
import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_server import compat
from ticket_server.access.identity import build_token_verifier
from ticket_server.access.ratelimit import CallerHttpLimit, http_limiter
from ticket_server.metrics import CONTENT_TYPE_LATEST
from ticket_server.server import Runtime, build_runtime, build_server
from ticket_server.settings import Settings
from ticket_server.tickets.domain import DatabaseUnavailable
from ticket_server.transports import frames

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
    it (bodies that are not JSON at all are left to the transport's Parse error)."""
    message, parse_error = frames.parse(body)
    return None if parse_error is not None else frames.problem(message)


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

    os.environ.update({
        "TICKET_SERVER_HOST": settings.host, "TICKET_SERVER_PORT": str(settings.port),
        "TICKET_SERVER_STATELESS_HTTP": "true",
    })


def build_http_app(runtime: Runtime):  # -> fastmcp StarletteWithLifespan
    """The whole HTTP surface on ``runtime``. Host/Origin validation (DNS-rebinding
    protection, MCP spec "Transports: Security Warning") is always on; loopback names are
    accepted, others only when listed in ``allowed_hosts``/``allowed_origins``."""
    from slowapi.middleware import SlowAPIASGIMiddleware
    from starlette.middleware import Middleware as AsgiMiddleware

    settings = runtime.settings
    mcp = build_server(runtime)
    # Every request to /mcp needs a valid bearer token (401 + WWW-Authenticate otherwise).
    mcp.auth = build_token_verifier(settings, runtime.callers)

    @mcp.custom_route("/healthz", methods=["GET"], include_in_schema=False)
    async def healthz(_: Request) -> Response:
        try:
            await runtime.repository.ping()
        except DatabaseUnavailable:
            return JSONResponse({"status": "unavailable", "database": "unavailable"}, status_code=503)
        return JSONResponse({"status": "ok", "database": "ok"})

    @mcp.custom_route("/metrics", methods=["GET"], include_in_schema=False)
    async def prometheus(request: Request) -> Response:
        if not metrics_allowed(settings, request):
            return JSONResponse({"error": "forbidden"}, status_code=403)
        return Response(runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app = mcp.http_app(
        path=MCP_PATH,
        middleware=[
            AsgiMiddleware(RequestBodyLimit, max_bytes=settings.max_request_bytes),
            # After authentication: the verified caller's own HTTP limit, then slowapi's.
            AsgiMiddleware(CallerHttpLimit), AsgiMiddleware(SlowAPIASGIMiddleware),
        ],
        json_response=True,
        stateless_http=settings.stateless_http,
        host_origin_protection=True,
        allowed_hosts=settings.allowed_hosts or None,
        allowed_origins=settings.allowed_origins or None,
    )
    limiter = http_limiter(settings)
    app.state.limiter = limiter
    for route in app.routes:  # limit the MCP endpoint; exempt the other routes
        endpoint = getattr(route, "endpoint", None)
        if endpoint is None:
            continue
        if getattr(route, "path", None) == MCP_PATH:
            compat.name_endpoint_for_slowapi(endpoint, "mcp_endpoint")
        elif hasattr(endpoint, "__name__"):
            limiter.exempt(endpoint)
    return app


def serve(app, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn until SIGTERM or SIGINT; a graceful stop (the lifespan,
    with the audit trail's flush, included) exits 0."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_config=None, timeout_graceful_shutdown=10)
    compat.graceful_uvicorn_server(config).run()
