"""Who is calling, on each transport.

- HTTP: a FastMCP token verifier resolves ``Authorization: Bearer <token>`` on every
  request, either against the callers table (``auth_mode=callers``) or as a JWT from an
  identity provider (``auth_mode=jwt``). The verified caller travels in the request's
  access token (client id = caller name, scopes, and our claims: queues, limits).
  The server publishes its protected-resource metadata (RFC 9728), which every 401's
  ``WWW-Authenticate`` points at. Only the header is read: never the query string.
- stdio and in memory: the caller named by the settings, looked up again on every call
  (``token``, else ``stdio_caller``, else the built-in ``local`` caller).
Both lookups go through ``CallerStore``, which keeps an answer for
``caller_cache_seconds`` (default 2): a revocation or rotation by another process takes
effect within that time, one by this process at once.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

from fastmcp.server.auth import AccessToken, TokenVerifier
from fastmcp.server.auth.providers.jwt import JWTVerifier
from fastmcp.server.dependencies import get_access_token, get_http_request
from mcp.server.auth.routes import build_resource_metadata_url
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ticket_server.access.callers import (
    BUILTIN_LOCAL,
    LOCAL,
    NAME,
    Caller,
    CallerStore,
    RegistryUnavailable,
    normalise_name,
    token_hash,
)
from ticket_server.settings import Settings

# Every scope a tool declares in its tags (`resource:action`); `callers add` refuses others.
KNOWN_SCOPES = ["tickets:read", "tickets:write"]
CLOCK_SKEW_SECONDS = 30
VOUCHED_SECONDS = 600.0
MAX_VOUCHED = 10_000  # tokens remembered as lately valid: more than any callers table holds
"""How far a token's ``nbf`` may be ahead of this server's clock."""


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class IdentityError(Exception):
    """The configured identity cannot be used; the message names the setting."""


def _access_token(caller: Caller, token: str, claims: dict[str, Any] | None = None) -> AccessToken:
    return AccessToken(
        token=token_hash(token),  # the secret itself is never kept past verification
        client_id=caller.name,
        scopes=sorted(caller.scopes),
        claims={**(claims or {}), **caller.claims()},
    )


def caller_from_access_token(token: AccessToken) -> Caller:
    return Caller.from_claims(token.client_id, token.scopes, token.claims)


UNVERIFIABLE = "dev.ticket-server/unverifiable"


def _unverifiable(token: str) -> AccessToken:
    """What a verifier returns for a token it could not check because the callers table
    did not answer: no caller, no scope. The HTTP gate answers 503 for it, never 401,
    which would tell the client its token is unknown or revoked."""
    return AccessToken(
        token=token_hash(token), client_id="", scopes=[], claims={UNVERIFIABLE: True}
    )


def unverifiable(token: AccessToken) -> bool:
    return token.claims.get(UNVERIFIABLE) is True


class _MetadataRoutes:
    """Serves ``/.well-known/oauth-protected-resource/<mcp path>`` (RFC 9728)."""

    authorization_servers: list[str]

    def _metadata_routes(self, resource_url: AnyHttpUrl | None) -> list[Route]:
        if resource_url is None:
            return []
        metadata: dict[str, Any] = {
            "resource": str(resource_url),
            "bearer_methods_supported": ["header"],
            "scopes_supported": KNOWN_SCOPES,
            "resource_name": "ticket-server",
        }
        if self.authorization_servers:
            metadata["authorization_servers"] = self.authorization_servers

        async def protected_resource_metadata(_: Request) -> Response:
            return JSONResponse(metadata, headers={"Cache-Control": "public, max-age=3600"})

        path = build_resource_metadata_url(resource_url).path or "/"
        return [Route(path, protected_resource_metadata, methods=["GET", "OPTIONS"])]


class CallerTokenVerifier(_MetadataRoutes, TokenVerifier):
    """Bearer tokens from the callers table; verified (by hash) on every request."""

    def __init__(self, store: CallerStore, base_url: str) -> None:
        super().__init__(base_url=base_url)
        self.store = store
        self.authorization_servers = []
        self.may_look_up: Callable[[], Awaitable[bool]] | None = None
        """Asked before a token the cache does not know is looked up in the table: False
        (its client address is past the limit of requests without a valid token) refuses
        it unread, so a flood of random tokens costs no query. A token that was valid
        within ``VOUCHED_SECONDS`` is looked up regardless: a caller sharing its address
        with a flood (a NAT, a proxy) is not locked out by it."""
        self.vouched: dict[str, float] = {}  # token hash -> when it was last valid

    async def verify_token(self, token: str) -> AccessToken | None:
        if (
            self.may_look_up is not None
            and not self.store.knows_token(token)
            and time.monotonic() - self.vouched.get(token_hash(token), -VOUCHED_SECONDS)
            >= VOUCHED_SECONDS
            and not await self.may_look_up()
        ):
            return None
        try:
            caller = await self.store.by_token(token)
        except RegistryUnavailable:
            return _unverifiable(token)
        if caller is None:
            return None
        if len(self.vouched) >= MAX_VOUCHED:
            self.vouched.clear()
        self.vouched[token_hash(token)] = time.monotonic()
        return _access_token(caller, token)

    def get_routes(self, mcp_path: str | None = None) -> list[Route]:
        self.set_mcp_path(mcp_path)
        return self._metadata_routes(self._get_resource_url(mcp_path))


class CallerJWTVerifier(_MetadataRoutes, JWTVerifier):
    """JWTs from an identity provider, failing closed: a token must be signed by the
    configured key, issued for this server (``aud``: MCP authorization, RFC 8707), carry
    ``exp`` (in the future) and, when it has ``nbf``, be past it (RFC 7519 4.1.4-4.1.5).

    The caller's name is ``jwt_caller_claim``, normalised as the callers table stores
    names (``normalise_name``); it must be a live row of the callers table, which gives
    its queues and limits, and the token's scopes are only those the row also has. A
    subject with no row gets nothing, unless ``jwt_default_role`` names a row whose
    scopes, queues and limits it then gets; a revoked name gets nothing, in any case or
    spacing."""

    def __init__(self, settings: Settings, store: CallerStore, base_url: str) -> None:
        if not (settings.jwt_jwks_url or settings.jwt_public_key):
            raise IdentityError(
                "TICKET_SERVER_AUTH_MODE=jwt needs TICKET_SERVER_JWT_JWKS_URL or TICKET_SERVER_JWT_PUBLIC_KEY"
            )
        if not settings.jwt_audience:
            raise IdentityError(
                "TICKET_SERVER_AUTH_MODE=jwt needs TICKET_SERVER_JWT_AUDIENCE (this server's own "
                "identifier, e.g. its public URL): without it a token issued for any other "
                "service would be accepted"
            )
        super().__init__(
            public_key=settings.jwt_public_key,
            jwks_uri=settings.jwt_jwks_url,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            algorithm=settings.jwt_algorithm,
            base_url=base_url,
        )
        self.store = store
        self.caller_claim = settings.jwt_caller_claim
        self.default_role = settings.jwt_default_role
        self.authorization_servers = [settings.jwt_issuer] if settings.jwt_issuer else []

    async def verify_token(self, token: str) -> AccessToken | None:
        verified = await super().verify_token(token)
        if verified is None:
            return None
        now = time.time()
        exp, nbf = verified.claims.get("exp"), verified.claims.get("nbf", 0)
        if not _number(exp) or exp <= now or not _number(nbf) or nbf > now + CLOCK_SKEW_SECONDS:
            return None
        raw = verified.claims.get(self.caller_claim)
        name = normalise_name(raw) if isinstance(raw, str) else ""
        if not NAME.match(name):
            return None
        try:
            row, known = await self.store.find(name)
            if not known and self.default_role:
                row = await self.store.by_name(self.default_role)
        except RegistryUnavailable:
            return _unverifiable(token)
        if row is None:  # revoked, or unknown without a default role: nothing
            return None
        # Every grant of the row (queues, write queues, limits, confirmations, toolsets,
        # kind) under the subject's name; the scopes only those the token has too.
        caller = dataclasses.replace(
            row, name=name, scopes=frozenset(verified.scopes) & row.scopes, registered=known
        )
        access = _access_token(caller, token, verified.claims)
        access.expires_at = verified.expires_at
        return access

    def get_routes(self, mcp_path: str | None = None) -> list[Route]:
        self.set_mcp_path(mcp_path)
        return self._metadata_routes(self._get_resource_url(mcp_path))


def build_token_verifier(settings: Settings, store: CallerStore) -> TokenVerifier:
    if settings.auth_mode == "jwt":
        return CallerJWTVerifier(settings, store, settings.base_url)
    return CallerTokenVerifier(store, settings.base_url)


async def stdio_caller(settings: Settings, store: CallerStore) -> Caller | None:
    """The caller of a stdio (or in-memory) connection, from the settings; None when
    the configured token or name is unknown or revoked."""
    if settings.token is not None:
        return await store.by_token(settings.token.get_secret_value())
    if settings.stdio_caller:
        return await store.by_name(settings.stdio_caller)
    registered, exists = await store.find(LOCAL)  # an operator may restrict or revoke `local`
    return registered if exists else BUILTIN_LOCAL


async def check_stdio_identity(settings: Settings, store: CallerStore) -> str:
    """The stdio caller's name, or ``IdentityError`` naming the setting to fix."""
    if settings.token is not None and settings.stdio_caller:
        # the token would win and the name be ignored without a word
        raise IdentityError(
            "TICKET_SERVER_TOKEN and TICKET_SERVER_STDIO_CALLER are both set, so which caller "
            "this server is would be a guess; unset one of them"
        )
    try:
        caller = await stdio_caller(settings, store)
    except RegistryUnavailable as exc:
        raise IdentityError(
            "the callers table is unavailable; run `ticket-server db upgrade`"
        ) from exc
    if caller is not None:
        return caller.name
    if settings.token is not None:
        raise IdentityError("TICKET_SERVER_TOKEN is not a valid token (unknown or revoked)")
    if settings.stdio_caller:
        raise IdentityError(
            f"TICKET_SERVER_STDIO_CALLER: no caller named {settings.stdio_caller!r} "
            "(or it is revoked); see `ticket-server callers list`"
        )
    raise IdentityError(
        "the `local` caller (stdio's default) is revoked in the callers table; "
        "`ticket-server callers rotate local` restores it, or set TICKET_SERVER_STDIO_CALLER "
        "or TICKET_SERVER_TOKEN to serve as another caller"
    )


def _in_http_request() -> bool:
    try:
        get_http_request()
    except RuntimeError:
        return False
    return True


class Identity:
    """Who is calling, for the call pipeline: over HTTP the token verified for this very
    request; on stdio and in memory the caller the settings name."""

    def __init__(self, settings: Settings, store: CallerStore) -> None:
        self.settings, self.store = settings, store

    @property
    def unconfigured(self) -> bool:
        """No stdio identity is set: the built-in ``local`` caller serves."""
        return self.settings.token is None and not self.settings.stdio_caller

    async def current(self) -> Caller | None:
        """The caller of the request being served (a resource read, a prompt): as
        ``resolve``, the transport taken from FastMCP's current context."""
        from fastmcp.server.dependencies import get_context

        try:
            transport = get_context().transport
        except RuntimeError:  # outside any request
            transport = None
        return (await self.resolve(transport))[0]

    async def resolve(self, transport: str | None) -> tuple[Caller | None, str]:
        """(the caller or None, the transport as the audit names it: http, stdio, memory).

        ``transport`` is FastMCP's (``Context.transport``): None in memory. An HTTP
        request without a verified token (which the HTTP layer refuses first) has no caller.
        """
        access = get_access_token()
        if access is not None:
            return caller_from_access_token(access), "http"
        if transport in ("streamable-http", "sse", "http") or _in_http_request():
            return None, "http"
        return await stdio_caller(self.settings, self.store), transport or "memory"


def transport_of(context: Any) -> str | None:
    """The transport of a FastMCP middleware context (``"stdio"``, ``"streamable-http"``,
    ...; None: none, e.g. a call made from inside the server)."""
    fastmcp_context = getattr(context, "fastmcp_context", None)
    return fastmcp_context.transport if fastmcp_context is not None else None


def protocol_version_of(context: Any) -> str | None:
    """The protocol revision a FastMCP middleware context's request was made in (None:
    no request context, e.g. a call made from inside the server)."""
    try:
        version = context.fastmcp_context.request_context.protocol_version
    except Exception:
        return None
    return version if isinstance(version, str) else None
