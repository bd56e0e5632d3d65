"""Rate limits with `limits` (moving window), counters in memory or in Redis.

- Per caller per tool, on tools/call only (discover, initialize, tools/list are free):
  a refused call is an ``isError`` result naming the limit and the wait, with the wait
  in seconds in the result's ``_meta``.
- Per caller on the HTTP endpoint, with slowapi: 429 + ``Retry-After`` and
  ``X-RateLimit-*`` headers (see ``http_limiter``).
One setting, ``rate_limit_storage_url``, chooses the storage for both.

When that storage (Redis) does not answer, ``rate_limit_failure`` decides: ``open``
(calls proceed without tool limits; one ERROR line per outage) or ``closed`` (every
tools/call is refused with an ``isError`` result asking to retry shortly). The HTTP
limit falls back to this process's memory until Redis answers again, in both cases.
"""

from __future__ import annotations

import logging
import math
import time
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache

from limits import RateLimitItem, parse
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindowRateLimiter
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter
from starlette.types import ASGIApp, Receive, Scope, Send

from ticket_server.access.callers import Caller
from ticket_server.access.identity import caller_from_access_token
from ticket_server.settings import Settings

META_KEY = "dev.ticket-server/rate-limit"
UNAVAILABLE_RETRY_SECONDS = 5
STORAGE_TIMEOUT_SECONDS = 2.0
log = logging.getLogger(__name__)


def _is_redis(url: str) -> bool:
    return url.split("://", 1)[0] in ("redis", "rediss", "redis+unix")


def async_storage(url: str):  # -> limits.aio.storage.Storage
    """The async storage for ``url`` (``memory://`` or ``redis://...``)."""
    if _is_redis(url):
        # redis-py's asyncio client; `limits` would otherwise ask for coredis.
        # Bounded waits: a Redis that does not answer must not hold a call for long.
        # A blocking pool: a burst of concurrent calls waits (boundedly) for a connection
        # instead of failing with MaxConnectionsError, which would count as "Redis down".
        from redis.asyncio import BlockingConnectionPool

        pool = BlockingConnectionPool.from_url(
            url, max_connections=256, timeout=STORAGE_TIMEOUT_SECONDS,
            socket_connect_timeout=STORAGE_TIMEOUT_SECONDS, socket_timeout=STORAGE_TIMEOUT_SECONDS,
        )
        return storage_from_string(f"async+{url}", implementation="redispy", connection_pool=pool)
    return storage_from_string(f"async+{url}")


@lru_cache(maxsize=1024)
def parse_limit(text: str) -> RateLimitItem:
    """``parse`` once per distinct limit string (a caller's own limit is read on every call)."""
    return parse(text)


def describe(item: RateLimitItem) -> str:
    unit = item.GRANULARITY.name
    per = f"{item.multiples} {unit}s" if item.multiples != 1 else unit
    return f"{item.amount} calls per {per}"


@dataclass(frozen=True)
class Refusal:
    """A tools/call the limiter refuses: the model-readable text, the result's ``_meta``
    (``META_KEY``: the limit and the wait), and whether the storage was the reason."""

    text: str
    meta: dict[str, object]
    storage_unavailable: bool = False


class ToolLimiter:
    """Counts each caller's calls of each tool; refuses past the caller's limit."""

    def __init__(self, settings: Settings) -> None:
        self.default = parse(settings.tool_rate_limit)
        self.write_default = parse(settings.write_rate_limit)
        url = settings.rate_limit_storage_url
        # Redis: `limits`' async storage (network I/O must not block the event loop).
        # memory://: its synchronous storage, which never waits on anything (the async
        # memory storage costs a task and a thread hop per hit). The same moving-window
        # algorithm either way.
        self.is_async = _is_redis(url)
        self.storage = async_storage(url) if self.is_async else storage_from_string(url)
        self.limiter = (AsyncMovingWindowRateLimiter if self.is_async else MovingWindowRateLimiter)(self.storage)
        self.failure = settings.rate_limit_failure
        self.storage_down = False

    async def admit(self, caller: Caller, tool: str, *, write: bool = False) -> Refusal | None:
        """None when ``caller`` may make one more call of ``tool`` now (counted), else why not.
        A ``write`` tool is held to ``write_rate_limit``, not the caller's read limit."""
        if write:
            item = self.write_default
        else:
            item = parse_limit(caller.tool_rate_limit) if caller.tool_rate_limit else self.default
        try:
            allowed, stats = await self._hit(item, caller.name, tool)
        except self.storage.base_exceptions as exc:
            self._went_down(exc)
            return None if self.failure == "open" else self._unavailable(item)
        if self.storage_down:
            self.storage_down = False
            log.warning("rate-limit storage answers again: tool limits apply")
        if allowed:
            return None
        retry = max(1, math.ceil(stats.reset_time - time.time()))
        text = (
            f"Rate limit reached for {tool}: this caller may make {describe(item)}. "
            f"Nothing was done; retry in {retry} seconds."
        )
        return Refusal(text, {META_KEY: {"limit": str(item), "retry_after_seconds": retry}})

    async def _hit(self, item: RateLimitItem, caller: str, tool: str):  # type: ignore[no-untyped-def]
        """(allowed, window stats when refused) for one call of ``tool`` by ``caller``."""
        if self.is_async:
            if await self.limiter.hit(item, "tool", caller, tool):
                return True, None
            return False, await self.limiter.get_window_stats(item, "tool", caller, tool)
        if self.limiter.hit(item, "tool", caller, tool):
            return True, None
        return False, self.limiter.get_window_stats(item, "tool", caller, tool)

    def _went_down(self, exc: BaseException) -> None:
        if self.storage_down:
            return
        self.storage_down = True
        # The exception's type only: its text may carry the storage URL (a password).
        policy = (
            "calls proceed without tool rate limits" if self.failure == "open"
            else "tools/call is refused until it answers"
        )
        log.error(
            f"rate-limit storage unavailable ({type(exc).__name__}): {policy} "
            f"(TICKET_SERVER_RATE_LIMIT_FAILURE={self.failure})"
        )

    @staticmethod
    def _unavailable(item: RateLimitItem) -> Refusal:
        retry = UNAVAILABLE_RETRY_SECONDS
        text = f"Nothing was done: rate limiting is unavailable; try again shortly (in {retry} seconds)."
        return Refusal(text, {META_KEY: {"limit": str(item), "retry_after_seconds": retry, "unavailable": True}},
                       storage_unavailable=True)


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
        # Redis down: count in this process's memory, check Redis again now and then
        # (slowapi backs off up to 32 s); never answer 500 for it.
        in_memory_fallback_enabled=True,
        swallow_errors=True,
        storage_options=(
            {"socket_connect_timeout": STORAGE_TIMEOUT_SECONDS, "socket_timeout": STORAGE_TIMEOUT_SECONDS}
            if _is_redis(settings.rate_limit_storage_url) else {}
        ),
    )


class CallerHttpLimit:
    """ASGI: records the verified caller's own HTTP limit for slowapi's limit function
    (runs after the authentication middleware, before slowapi's)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        access = getattr(scope.get("user"), "access_token", None) if scope["type"] == "http" else None
        reset = _http_limit.set(caller_from_access_token(access).http_rate_limit if access is not None else None)
        try:
            await self.app(scope, receive, send)
        finally:
            _http_limit.reset(reset)
