"""Rate limits with `limits` (moving window), counters in memory or in Redis.

- Per caller per operation, on tools/call only (discover, initialize, tools/list are
  free): a deprecated name counts with its replacement, and every name the caller may
  not call (unknown, out of scope) counts against one shared allowance, so no choice of
  name gives a caller more calls. A refused call is an ``isError`` result naming the
  limit and the wait, with the wait in seconds in the result's ``_meta``.
- Per caller on the HTTP endpoint (``HttpLimiter``): the transport answers 429 with
  ``Retry-After`` and ``X-RateLimit-*`` headers.
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
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from limits import RateLimitItem, WindowStats, parse
from limits.aio.storage import Storage as AsyncStorage
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindowRateLimiter
from limits.storage import Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from ticket_server.access.callers import Caller
from ticket_server.settings import Settings

META_KEY = "dev.ticket-server/rate-limit"
UNAVAILABLE_RETRY_SECONDS = 5
STORAGE_TIMEOUT_SECONDS = 2.0
log = logging.getLogger(__name__)


def _is_redis(url: str) -> bool:
    return url.split("://", 1)[0] in ("redis", "rediss", "redis+unix")


def async_storage(url: str) -> AsyncStorage:
    """The async storage for ``url`` (``memory://`` or ``redis://...``)."""
    if _is_redis(url):
        # redis-py's asyncio client; `limits` would otherwise ask for coredis.
        # Bounded waits: a Redis that does not answer must not hold a call for long.
        # A blocking pool: a burst of concurrent calls waits (boundedly) for a connection
        # instead of failing with MaxConnectionsError, which would count as "Redis down".
        from redis.asyncio import BlockingConnectionPool

        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=256,
            timeout=STORAGE_TIMEOUT_SECONDS,
            socket_connect_timeout=STORAGE_TIMEOUT_SECONDS,
            socket_timeout=STORAGE_TIMEOUT_SECONDS,
        )
        from ticket_server import compat

        compat.redis_connections_apart(pool)  # no connection keeps the call that opened it
        storage = storage_from_string(
            f"async+{url}",
            implementation="redispy",
            connection_pool=pool,  # type: ignore[arg-type]  # passed on to redis-py as is
        )
    else:
        storage = storage_from_string(f"async+{url}")
    assert isinstance(storage, AsyncStorage)
    return storage


def sync_storage(url: str) -> Storage:
    """The synchronous storage for ``url`` (``memory://``; other schemes as `limits` reads them)."""
    if url == "memory://":
        from ticket_server import compat

        return compat.memory_storage()
    storage = storage_from_string(url)
    assert isinstance(storage, Storage)
    return storage


@lru_cache(maxsize=1024)
async def storage_problem(url: str) -> str | None:
    """Why the rate-limit storage at ``url`` cannot be used now, in one line naming the
    setting (None when it answers, and always for ``memory://``): checked before serving,
    so that a wrong or stopped Redis is said at start, not at the first call."""
    if not _is_redis(url):
        return None
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    client = Redis.from_url(
        url.replace("redis+unix://", "unix://", 1),  # `limits`' name for a socket path
        socket_connect_timeout=STORAGE_TIMEOUT_SECONDS,
        socket_timeout=STORAGE_TIMEOUT_SECONDS,
    )
    try:
        await client.ping()
        return None
    except (RedisError, OSError) as exc:
        # The exception's type only: its text may carry the URL (a password).
        reason = type(exc).__name__
    finally:
        await client.aclose()
    return (
        "TICKET_SERVER_RATE_LIMIT_STORAGE_URL: the rate-limit storage (Redis) does not answer "
        f"({reason}); start it or correct the URL, or use memory:// for a single server process"
    )


def parse_limit(text: str) -> RateLimitItem:
    """``parse`` once per distinct limit string (a caller's own limit is read on every call)."""
    return parse(text)


def describe(item: RateLimitItem) -> str:
    unit = item.GRANULARITY.name
    per = f"{item.multiples} {unit}s" if item.multiples != 1 else unit
    return f"{item.amount} {'call' if item.amount == 1 else 'calls'} per {per}"


@dataclass(frozen=True)
class Refusal:
    """A tools/call the limiter refuses: the model-readable text, the result's ``_meta``
    (``META_KEY``: the limit and the wait), and whether the storage was the reason."""

    text: str
    meta: dict[str, Any]
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
        self.storage: Storage | AsyncStorage
        self.async_limiter: AsyncMovingWindowRateLimiter | None = None
        self.sync_limiter: MovingWindowRateLimiter | None = None
        if self.is_async:
            self.storage = async_storage(url)
            self.async_limiter = AsyncMovingWindowRateLimiter(self.storage)
        else:
            self.storage = sync_storage(url)
            self.sync_limiter = MovingWindowRateLimiter(self.storage)
        self.failure = settings.rate_limit_failure
        self.storage_down = False

    async def admit(
        self,
        caller: Caller,
        tool: str,
        key: str | None = None,
        *,
        write: bool = False,
    ) -> Refusal | None:
        """None when ``caller`` may make one more call of ``tool`` now (counted), else why not.
        ``key`` (default ``tool``) names the allowance counted: names that share one give
        a caller one allowance between them. A ``write`` tool is held to
        ``write_rate_limit``, not the caller's read limit."""
        if write:
            item = self.write_default
        else:
            item = parse_limit(caller.tool_rate_limit) if caller.tool_rate_limit else self.default
        try:
            allowed, stats = await self._hit(item, caller.name, key or tool)
        except self.storage.base_exceptions as exc:
            self._went_down(exc)
            return None if self.failure == "open" else self._unavailable(item)
        if self.storage_down:
            self.storage_down = False
            log.warning("rate-limit storage answers again: tool limits apply")
        if allowed or stats is None:
            return None
        retry = max(1, math.ceil(stats.reset_time - time.time()))
        text = (
            f"Rate limit reached for {tool}: this caller may make {describe(item)}. "
            f"Nothing was done; retry in {retry} seconds."
        )
        return Refusal(text, {META_KEY: {"limit": str(item), "retry_after_seconds": retry}})

    async def _hit(
        self, item: RateLimitItem, caller: str, tool: str
    ) -> tuple[bool, WindowStats | None]:
        """(allowed, window stats when refused) for one call of ``tool`` by ``caller``."""
        if self.async_limiter is not None:
            if await self.async_limiter.hit(item, "tool", caller, tool):
                return True, None
            return False, await self.async_limiter.get_window_stats(item, "tool", caller, tool)
        assert self.sync_limiter is not None
        if self.sync_limiter.hit(item, "tool", caller, tool):
            return True, None
        return False, self.sync_limiter.get_window_stats(item, "tool", caller, tool)

    def _went_down(self, exc: BaseException) -> None:
        if self.storage_down:
            return
        self.storage_down = True
        # The exception's type only: its text may carry the storage URL (a password).
        policy = (
            "calls proceed without tool rate limits"
            if self.failure == "open"
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
        return Refusal(
            text,
            {META_KEY: {"limit": str(item), "retry_after_seconds": retry, "unavailable": True}},
            storage_unavailable=True,
        )


# --- HTTP endpoint --------------------------------------------------------------

FALLBACK_SECONDS = 30


@dataclass(frozen=True)
class HttpVerdict:
    """One request counted against an HTTP limit: ``allowed``, the limit's size, what
    remains of it and the seconds until the window frees a request (``reset_seconds``)."""

    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> dict[str, str]:
        """``X-RateLimit-*`` and, when refused, ``Retry-After`` (RFC 9110 section 10.2.3)."""
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_seconds),
        }
        return headers if self.allowed else {**headers, "Retry-After": str(self.reset_seconds)}


class HttpLimiter:
    """Counts HTTP requests to the MCP endpoint per key (a verified caller, or a client
    address for requests without a valid token), moving window, in the storage of
    ``rate_limit_storage_url``. When that storage (Redis) does not answer, requests are
    counted in this process's memory until it answers again (checked every
    ``FALLBACK_SECONDS``): the HTTP limit never fails open and never answers 500."""

    def __init__(self, settings: Settings) -> None:
        from ticket_server import compat

        self.default = parse(settings.http_rate_limit)
        url = settings.rate_limit_storage_url
        self.is_async = _is_redis(url)
        self.storage: Storage | AsyncStorage
        self.async_limiter: AsyncMovingWindowRateLimiter | None = None
        # ``local``: the memory:// storage's limiter, or with Redis this process's memory,
        # counting while Redis does not answer.
        if self.is_async:
            self.storage = async_storage(url)
            self.async_limiter = AsyncMovingWindowRateLimiter(self.storage)
            self.local = MovingWindowRateLimiter(compat.memory_storage())
        else:
            self.storage = sync_storage(url)
            self.local = MovingWindowRateLimiter(self.storage)
        self.retry_storage_at = 0.0
        self.storage_down = False

    async def hit(self, key: str, limit: str | None = None) -> HttpVerdict:
        """Count one request for ``key`` against ``limit`` (or the default)."""
        item = parse_limit(limit) if limit else self.default
        if self.async_limiter is not None and time.monotonic() >= self.retry_storage_at:
            try:
                allowed = await self.async_limiter.hit(item, "http", key)
                stats = await self.async_limiter.get_window_stats(item, "http", key)
                self.storage_down = False
                return _verdict(item, allowed, stats)
            except self.storage.base_exceptions as exc:
                self.retry_storage_at = time.monotonic() + FALLBACK_SECONDS
                if not self.storage_down:  # once per outage; the tool limiter says what calls do
                    self.storage_down = True
                    log.warning(
                        f"HTTP request limit: counting in this process's memory while the "
                        f"rate-limit storage does not answer ({type(exc).__name__})"
                    )
        allowed = self.local.hit(item, "http", key)
        return _verdict(item, allowed, self.local.get_window_stats(item, "http", key))

    async def exhausted(self, key: str) -> bool:
        """Whether ``key`` has no request left of the default limit (nothing counted)."""
        item = self.default
        if self.async_limiter is not None and time.monotonic() >= self.retry_storage_at:
            try:
                return not await self.async_limiter.test(item, "http", key)
            except self.storage.base_exceptions:
                pass  # ``hit`` notes the outage and counts in memory
        return not self.local.test(item, "http", key)


def _verdict(item: RateLimitItem, allowed: bool, stats: WindowStats) -> HttpVerdict:
    reset = max(1, math.ceil(stats.reset_time - time.time()))
    return HttpVerdict(allowed, item.amount, max(0, stats.remaining), reset)
