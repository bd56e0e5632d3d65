"""``ticket-server serve`` with slowapi's ASGI middleware (``SlowAPIASGIMiddleware``) in
front of the HTTP app, set up as a switch to slowapi would set it up: a ``Limiter`` on
``app.state`` with the HTTP limit as its default, keyed by the bearer token, its
``X-RateLimit-*`` headers on, and the MCP route's endpoint given the ``__name__`` slowapi
names a route by (without one, slowapi answers every request to /mcp with 500).
``SSE_PING_SECONDS`` shortens the keep-alive interval of SSE streams (15 s) so that a
test sees the first body chunk of a stream soon. tests/transports/test_slowapi.py runs
it as ``python -m tests.transports.slowapi_served serve --transport http --port N``."""

from __future__ import annotations

import os
import sys
from typing import Any

from slowapi import Limiter
from slowapi.middleware import SlowAPIASGIMiddleware
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request

from ticket_server import cli
from ticket_server.transports import http

build_http_app = http.build_http_app


def bearer(request: Request) -> str:
    return request.headers.get("authorization", "")


def build_with_slowapi(runtime: Any) -> Any:
    app = build_http_app(runtime)
    app.state.limiter = Limiter(
        key_func=bearer, default_limits=[runtime.settings.http_rate_limit], headers_enabled=True
    )
    for route in app.routes:
        if getattr(route, "path", None) == http.MCP_PATH:
            route.endpoint.__name__ = "mcp"
    app.add_middleware(SlowAPIASGIMiddleware)
    return app


if __name__ == "__main__":
    if "SSE_PING_SECONDS" in os.environ:
        EventSourceResponse.DEFAULT_PING_INTERVAL = float(os.environ["SSE_PING_SECONDS"])
    http.build_http_app = build_with_slowapi
    sys.exit(cli.main(sys.argv[1:]))
