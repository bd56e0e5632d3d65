"""Rate limits with `limits` (moving window), counters in memory or in Redis.

- Per caller per tool, on tools/call only (discover, initialize, tools/list are free):
  a refused call is an ``isError`` result naming the limit and the wait, with the wait
  in seconds in the result's ``_meta``.
- Per caller on the HTTP endpoint, with slowapi: 429 + ``Retry-After`` and
  ``X-RateLimit-*`` headers (see ``http_limiter``).
One setting, ``rate_limit_storage_url``, chooses the storage for both.
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar

from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import ToolResult
from limits import RateLimitItem, parse
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from mcp import types as mt
from starlette.types import ASGIApp, Receive, Scope, Send

from ticket_server.access.context import current_call
from ticket_server.settings import Settings

META_KEY = "dev.ticket-server/rate-limit"


def _is_redis(url: str) -> bool:
    return url.split("://", 1)[0] in ("redis", "rediss", "redis+unix")


def async_storage(url: str):  # -> limits.aio.storage.Storage
    """The async storage for ``url`` (``memory://`` or ``redis://...``)."""
    if _is_redis(url):
        # redis-py's asyncio client; `limits` would otherwise ask for coredis.
        return storage_from_string(f"async+{url}", implementation="redispy")
    return storage_from_string(f"async+{url}")


def describe(item: RateLimitItem) -> str:
    unit = item.GRANULARITY.name
    per = f"{item.multiples} {unit}s" if item.multiples != 1 else unit
    return f"{item.amount} calls per {per}"


class ToolRateLimitMiddleware(Middleware):
    """Counts each caller's calls of each tool; refuses past the caller's limit."""

    def __init__(self, settings: Settings) -> None:
        self.default = parse(settings.tool_rate_limit)
        self.limiter = MovingWindowRateLimiter(async_storage(settings.rate_limit_storage_url))

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        record = current_call.get()
        caller = record.caller if record is not None else None
        if caller is None:  # authorization refuses these before they get here
            return await call_next(context)
        tool = context.message.name
        item = parse(caller.tool_rate_limit) if caller.tool_rate_limit else self.default
        if await self.limiter.hit(item, "tool", caller.name, tool):
            return await call_next(context)
        stats = await self.limiter.get_window_stats(item, "tool", caller.name, tool)
        retry = max(1, math.ceil(stats.reset_time - time.time()))
        limit = describe(item)
        if record is not None:
            record.outcome, record.detail = "rate_limited", f"{limit}; retry in {retry}s"
        text = (
            f"Rate limit reached for {tool}: this caller may make {limit}. "
            f"Nothing was done; retry in {retry} seconds."
        )
        return ToolResult(
            content=[mt.TextContent(type="text", text=text)],
            meta={META_KEY: {"limit": str(item), "retry_after_seconds": retry}},
            is_error=True,
        )


# --- HTTP endpoint (slowapi) ---------------------------------------------------

_http_limit: ContextVar[str | None] = ContextVar("ticket_server_http_limit", default=None)


def http_limiter(settings: Settings):  # -> slowapi.Limiter
    """slowapi's limiter: keyed by the verified caller (by client address when the
    request carries no valid token), the caller's own limit or the default."""
    from slowapi import Limiter
    from slowapi.util import get_remote_address

    def key(request) -> str:  # type: ignore[no-untyped-def]
        user = request.scope.get("user")
        access = getattr(user, "access_token", None)
        if access is not None:
            return f"caller:{access.client_id}"
        return f"address:{get_remote_address(request)}"

    def limit() -> str:
        return _http_limit.get() or settings.http_rate_limit

    return Limiter(
        key_func=key,
        default_limits=[limit],
        storage_uri=settings.rate_limit_storage_url,
        strategy="moving-window",
        headers_enabled=True,
        key_prefix="http",
    )


class CallerHttpLimit:
    """ASGI: records the verified caller's own HTTP limit for slowapi's limit function
    (runs after the authentication middleware, before slowapi's)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        access = getattr(scope.get("user"), "access_token", None) if scope["type"] == "http" else None
        ours = (access.claims.get("ticket_server_caller") or {}) if access is not None else {}
        reset = _http_limit.set(ours.get("http_rate_limit"))
        try:
            await self.app(scope, receive, send)
        finally:
            _http_limit.reset(reset)
