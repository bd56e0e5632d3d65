"""The access room's one entry point for ``server.py`` and ``http.py``: callers,
identity, authorization, rate limits and audit, built from the settings."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from fastmcp.server.middleware import Middleware

from ticket_server.access.audit import AuditMiddleware, AuditWriter
from ticket_server.access.authorization import AuthorizationMiddleware
from ticket_server.access.callers import BUILTIN_LOCAL, Caller, CallerStore, open_store
from ticket_server.access.identity import build_token_verifier, resolve_caller
from ticket_server.access.ratelimit import CallerHttpLimit, ToolRateLimitMiddleware, http_limiter
from ticket_server.settings import Settings


class QueryStringRedactor(logging.Filter):
    """uvicorn's access log prints each request's path with its query string; a client
    that puts a token there (never accepted) must not get it written to the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].split("?", 1)[0] + "?[redacted]", *args[3:])
        return True


class AccessControl:
    """Everything that decides who may do what, how fast, and what is recorded."""

    def __init__(
        self, settings: Settings, store: CallerStore | None = None,
        observers: Sequence[Callable[[dict[str, Any]], None]] = (),
    ) -> None:
        """``observers`` see every audit row as it is recorded (metrics)."""
        self.settings = settings
        self.store = store or open_store(settings)
        self.audit = AuditWriter(self.store, settings.audit_batch_size, settings.audit_flush_seconds, observers)
        self.rate_limits = ToolRateLimitMiddleware(settings)
        # Audit rows reach stderr whatever the log level.
        logging.getLogger("ticket_server.audit").setLevel(logging.INFO)

    async def resolve(self) -> tuple[Caller | None, str]:
        return await resolve_caller(self.settings, self.store)

    def outer_middleware(self) -> list[Middleware]:
        """Audit + trace, authorization, rate limit: in this order, outermost first."""
        return [AuditMiddleware(self.audit), AuthorizationMiddleware(self.resolve, self._list_fallback()), self.rate_limits]

    def _list_fallback(self) -> Caller | None:
        unconfigured = self.settings.token is None and not self.settings.stdio_caller
        return BUILTIN_LOCAL if unconfigured else None

    async def start(self) -> None:
        await self.audit.start()

    async def stop(self) -> None:
        """Flush the audit trail even when the server is being cancelled."""
        with anyio.CancelScope(shield=True):
            await self.audit.stop()
            await self.store.aclose()

    # --- HTTP ---------------------------------------------------------------

    def base_url(self) -> str:
        return self.settings.public_url or f"http://{self.settings.host}:{self.settings.port}"

    def token_verifier(self):  # -> fastmcp TokenVerifier
        return build_token_verifier(self.settings, self.store, self.base_url())

    def http_middleware(self) -> list:
        """Starlette middleware after authentication: the per-caller HTTP limit."""
        from slowapi.middleware import SlowAPIASGIMiddleware
        from starlette.middleware import Middleware as AsgiMiddleware

        return [AsgiMiddleware(CallerHttpLimit), AsgiMiddleware(SlowAPIASGIMiddleware)]

    def install_http(self, app, mcp_path: str) -> None:  # app: Starlette
        """Give slowapi its limiter; limit the MCP endpoint, exempt the other routes."""
        access_log = logging.getLogger("uvicorn.access")
        if not any(isinstance(f, QueryStringRedactor) for f in access_log.filters):
            access_log.addFilter(QueryStringRedactor())
        limiter = http_limiter(self.settings)
        app.state.limiter = limiter
        for route in app.routes:
            endpoint = getattr(route, "endpoint", None)
            if endpoint is None:
                continue
            if getattr(route, "path", None) == mcp_path:
                # slowapi names routes by endpoint.__name__; FastMCP's MCP endpoint is
                # an ASGI object without one (slowapi would answer 500 otherwise).
                if not hasattr(endpoint, "__name__"):
                    endpoint.__name__ = "mcp_endpoint"
            elif hasattr(endpoint, "__name__"):
                limiter.exempt(endpoint)
