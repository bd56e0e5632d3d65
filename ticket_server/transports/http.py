"""The HTTP transport: ``build_http_app(runtime)`` is the ASGI app: Streamable HTTP at
/mcp, GET /healthz, GET /metrics, the protected-resource metadata (RFC 9728).

Every request to /mcp passes, outermost first: ``NamedMisdirection`` (a foreign Host's
421 names the setting), CORS, FastMCP's Host/Origin validation and bearer-token
verification (headers only), then ``gate.McpGate``: its stages in order, cheapest first
(token, size, media type, body, parse, the caller's HTTP limit, JSON-RPC shape), each
refusal a JSON-RPC error body (``refusals.py``); then legacy sessions
(``sessions.py``) or, stateless, the MCP app; then the call pipeline (``pipeline.py``).
Answers are one JSON body (``json_response``), except a legacy session of a client that
can ask the person, which answers in SSE streams.
"""

from __future__ import annotations

import hmac
import logging
import sys
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any

from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_server import compat
from ticket_server.access.audit import storable
from ticket_server.access.callers import Caller
from ticket_server.access.identity import (
    CallerTokenVerifier,
    build_token_verifier,
)
from ticket_server.access.ratelimit import HttpLimiter
from ticket_server.metrics import CONTENT_TYPE_LATEST
from ticket_server.server import Runtime, build_runtime, build_server
from ticket_server.settings import Settings
from ticket_server.tickets.domain import DatabaseUnavailable
from ticket_server.transports.gate import MCP_PATH as MCP_PATH  # re-exported: the CLI names it
from ticket_server.transports.gate import McpGate
from ticket_server.transports.process import collector_paused
from ticket_server.transports.refusals import address_key, jsonrpc_error
from ticket_server.transports.sessions import SessionQuota

if TYPE_CHECKING:
    from fastmcp.server.http import StarletteWithLifespan

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
# Request line and headers: a JWT and the MCP headers fit many times over.
MAX_HEAD_BYTES = 16 * 1024


def metrics_allowed(settings: Settings, request: Request) -> bool:
    """GET /metrics: with ``metrics_token`` set, only `Authorization: Bearer <it>`;
    without one, only clients on the loopback interface (a scraper beside the server)."""
    if settings.metrics_token is not None:
        expected = f"Bearer {settings.metrics_token.get_secret_value()}".encode()
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)
    host = request.client.host if request.client else ""
    return host.startswith(LOOPBACK)


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


def _header(scope: Scope, name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == name), "")


SWITCH_INTERVAL = 0.001
"""Seconds a thread runs Python before it must let another have the GIL (CPython's
default: 0.005)."""


def prefer_the_event_loop() -> None:
    """Shorten the interpreter's thread switch interval to ``SWITCH_INTERVAL``. Searches
    and reads run in worker threads (``tickets/storage.py``) and share the GIL with the
    event loop, which waited out CPython's default interval for it at every step of
    every other request: one caller's searches without pause held back every other
    caller's lookups (``bench/fairness.py``, its "unlimited" phase; figures in
    ``bench/ANALYSIS.md``)."""
    sys.setswitchinterval(SWITCH_INTERVAL)


def create_app() -> StarletteWithLifespan:
    """The app from the environment's settings: the factory each uvicorn worker calls
    (`ticket-server serve --transport http --workers N`, see ``export_to_workers``)."""
    from ticket_server.logging import configure_logging

    prefer_the_event_loop()
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    return serving_app(settings)


def serving_app(settings: Settings) -> StarletteWithLifespan:
    """The app a serving process runs (``serve --transport http``, each worker of
    ``--workers N``): built with the garbage collector paused and what it built frozen
    out of the collector's passes (``process.collector_paused``)."""
    with collector_paused():
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

    from ticket_server.access.policy import required_scopes

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


def serve(app: ASGIApp, settings: Settings, bound: Callable[[int], None] | None = None) -> None:
    """Serve ``app`` with uvicorn until SIGTERM or SIGINT; a graceful stop (the lifespan,
    with the audit trail's flush, included) exits 0. ``bound`` is told the port once the
    socket is bound (the one the system chose for port 0). A connection that has not sent a
    request's headers within ``http_read_timeout`` seconds is closed (slowloris), and no
    answer announces the server software. X-Forwarded-* are read only from the proxies
    ``forwarded_allow_ips`` names (empty: none): uvicorn's default
    trusts loopback, so any local process, or a local proxy passing the header on, could
    pick the client address the per-address limit and /metrics see."""
    import uvicorn

    prefer_the_event_loop()
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
    sock = config.bind_socket()
    if bound is not None:
        bound(sock.getsockname()[1])
    compat.graceful_uvicorn_server(config).run(sockets=[sock])
