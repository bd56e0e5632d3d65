"""The caller of a stdio (or in-memory) connection: named by the settings, not by a
request. Free of FastMCP, so that the start-up checks (``ticket_server.checks``) can
run it in a process of their own without importing the server."""

from __future__ import annotations

from ticket_server.access.callers import BUILTIN_LOCAL, LOCAL, Caller, CallerStore, RegistryUnavailable
from ticket_server.settings import Settings


class IdentityError(Exception):
    """The configured stdio identity cannot be used; the message names the setting."""


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
    try:
        caller = await stdio_caller(settings, store)
    except RegistryUnavailable as exc:
        raise IdentityError("the callers table is unavailable; run `ticket-server db upgrade`") from exc
    if caller is not None:
        return caller.name
    if settings.token is not None:
        raise IdentityError("TICKET_SERVER_TOKEN is not a valid token (unknown or revoked)")
    if settings.stdio_caller:
        raise IdentityError(
            f"TICKET_SERVER_STDIO_CALLER: no caller named {settings.stdio_caller!r} "
            "(or it is revoked); see `ticket-server callers list`"
        )
    raise IdentityError("the built-in `local` caller is revoked; set TICKET_SERVER_TOKEN")
