"""Checks before a command does its work, each a ``CommandError`` of one line naming the
setting or option to fix: the HTTP port is free, the storage a server writes to is
writable and answers."""

from __future__ import annotations

import asyncio

from ticket_server.admin import CommandError
from ticket_server.settings import Settings


def require_writable_storage(settings: Settings) -> None:
    """``serve``: the SQLite file (and its folder) can be written, for the audit rows and
    the writes, and the rate-limit storage (Redis) answers; said before anything is
    served rather than at the first call."""
    if settings.is_sqlite:
        from ticket_server.db import sqlite_write_problem

        problem = sqlite_write_problem(settings.database_url)
        if problem is not None:
            raise CommandError(f"serve: {problem}")
    if not settings.rate_limit_storage_url.startswith("memory://"):
        from ticket_server.access.ratelimit import storage_problem

        problem = asyncio.run(storage_problem(settings.rate_limit_storage_url))
        if problem is not None:
            raise CommandError(f"serve: {problem}")


def require_readable_synonyms(settings: Settings) -> None:
    """``serve``: the search synonyms file (``TICKET_SERVER_SEARCH_SYNONYMS``) reads as a
    list of groups, said before anything is served rather than at the first search."""
    if settings.search_synonyms is None:
        return
    from ticket_server.tickets.synonyms import unreadable

    reason = unreadable(settings.search_synonyms)
    if reason is None:
        return
    raise CommandError(
        f"serve: TICKET_SERVER_SEARCH_SYNONYMS={settings.search_synonyms}: {reason}; "
        "fix the file, or unset the setting to use the default list"
    )


def require_free_port(host: str, port: int) -> None:
    """``CommandError`` unless ``host:port`` can be bound now: checked before anything is
    built or logged, with the socket options uvicorn binds with (SO_REUSEADDR)."""
    import errno
    import socket

    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise CommandError(
            f"serve: cannot resolve the HTTP address {host!r} ({exc.strerror}); "
            "set TICKET_SERVER_HOST or --host to an address of this machine, e.g. 127.0.0.1"
        ) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(
                    f"serve: port {port} on {host} is already in use by another process; "
                    f"stop it or pick another port with TICKET_SERVER_PORT={port + 1} or --port {port + 1}"
                ) from None
            raise CommandError(
                f"serve: cannot listen on {host}:{port} ({exc.strerror}); choose another "
                "address or port with TICKET_SERVER_HOST / --host and TICKET_SERVER_PORT / --port"
            ) from None
