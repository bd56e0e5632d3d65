"""One secret, one key per use: everything this server seals for a client to hand back.

Three things leave the server sealed and come back: search and conversation cursors
(AES-SIV, ``tools/cursor.py``), a write's confirmation claims (HMAC-SHA256,
``SignedClaims``) and, around them, the SDK's 2026-07-28 request state (AES-GCM,
``RequestStateSeal``). Each is keyed by its own subkey, derived with HKDF-SHA256
(RFC 5869) from the server's one secret with the use as HKDF's ``info``: a value sealed
for one use never opens as another, and no subkey says anything about the others.

The secret is ``TICKET_SERVER_SECRET`` (``Settings.secret``); ``TICKET_SERVER_CURSOR_SECRET``
(``Settings.cursor_secret``) is its older name and still works. Unset, a random secret
is made on first use and kept beside the data (``installation_secret``), so every
process on one SQLite file shares it; replicas on another database must set it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

if TYPE_CHECKING:
    from mcp.server.request_state import AESGCMRequestStateCodec

    from ticket_server.settings import Settings

SECRET_FILE_SUFFIX = ".cursor-secret"
"""The installation secret's file beside an SQLite database (the name it always had)."""
SECRET_SETTING = "TICKET_SERVER_SECRET"
SALT = b"ticket-server"


class Use(StrEnum):
    """What a subkey seals (HKDF's ``info``): one key for each, never shared."""

    CURSOR = "search cursor"
    CONFIRMATION = "confirmation claims"
    REQUEST_STATE = "request state"


def subkey(secret: str, use: Use) -> bytes:
    """The 32-byte key for ``use`` from the server's ``secret`` (HKDF-SHA256)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=SALT, info=use.value.encode())
    return hkdf.derive(secret.encode())


class Keys:
    """The subkeys of one secret, each derived on its first use and kept. ``secret`` is
    read on the first use, not when the server is built: a server that fails its
    start-up checks makes no installation secret."""

    def __init__(self, secret: Callable[[], str]) -> None:
        self._secret = secret
        self._keys: dict[Use, bytes] = {}

    def __call__(self, use: Use) -> bytes:
        key = self._keys.get(use)
        if key is None:
            key = self._keys[use] = subkey(self._secret(), use)
        return key

    def of(self, use: Use) -> Callable[[], bytes]:
        """A function giving the key for ``use`` (for a part that needs only that one)."""
        return lambda: self(use)


def configured_secret(settings: Settings) -> str | None:
    """The secret the settings name: ``secret``, else its older name ``cursor_secret``."""
    chosen = settings.secret if settings.secret is not None else settings.cursor_secret
    return chosen.get_secret_value() if chosen is not None else None


def server_secret(settings: Settings) -> tuple[Callable[[], str], str | None]:
    """(the server's secret, read on first use; a start-up warning or None).

    The configured secret when set; else a random secret made once per installation and
    kept beside the data: next to an SQLite file, or in the user's data directory for any
    other database, where replicas sharing that database must set the secret (the
    warning says so)."""
    configured = configured_secret(settings)
    if configured is not None:
        return (lambda: configured), None
    from ticket_server.settings import default_data_dir

    database = settings.sqlite_path
    path = (
        database.with_name(database.name + SECRET_FILE_SUFFIX)
        if database is not None
        else default_data_dir() / f"cursor{SECRET_FILE_SUFFIX}"
    )
    warning = (
        None
        if database is not None
        else (
            f"{SECRET_SETTING} is not set: cursors and confirmations are sealed with this "
            f"installation's secret in {path}; replicas sharing one database must all set "
            f"{SECRET_SETTING} to one value, or each refuses what the others sealed"
        )
    )
    return cache(lambda: installation_secret(path)), warning


def installation_secret(path: Path) -> str:
    """The random secret kept in ``path``, made (32 random bytes, mode 0600) when there
    is none; several processes starting at once all read the one that was made first."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole under a private name, then linked into place: a reader never
        # sees a half-written secret, and the first link made wins.
        draft = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(32))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text(encoding="ascii").strip()


class SignedClaims:
    """Claims (a JSON object) signed with HMAC-SHA256: readable by whoever holds the
    token, changed by nobody without the key. For values that say nothing secret (a
    confirmation's caller, tool, ticket, argument hash, expiry, nonce)."""

    def __init__(self, key: Callable[[], bytes]) -> None:
        self._key = key

    def seal(self, claims: dict[str, Any]) -> str:
        payload = base64.urlsafe_b64encode(json.dumps(claims, sort_keys=True).encode()).decode()
        return payload + "." + self._tag(payload)

    def unseal(self, token: str) -> dict[str, Any] | None:
        """The claims, or None when ``token`` was not made by ``seal`` with this key."""
        if not token.isascii():  # never sealed here (and compare_digest refuses the str)
            return None
        payload, _, tag = token.rpartition(".")
        if not payload or not hmac.compare_digest(tag, self._tag(payload)):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(payload.encode()))
        except ValueError:
            return None
        return claims if isinstance(claims, dict) else None

    def _tag(self, payload: str) -> str:
        return hmac.new(self._key(), payload.encode(), hashlib.sha256).hexdigest()


class RequestStateSeal:
    """The SDK's request-state codec (AES-256-GCM, ``RequestStateSecurity(codec=...)``)
    under ``Use.REQUEST_STATE``, made on the first state sealed or opened: any process
    holding the secret opens what another sealed."""

    def __init__(self, keys: Keys) -> None:
        self._keys = keys
        self._codec: AESGCMRequestStateCodec | None = None

    def _made(self) -> AESGCMRequestStateCodec:
        if self._codec is None:
            from mcp.server.request_state import AESGCMRequestStateCodec

            self._codec = AESGCMRequestStateCodec([self._keys(Use.REQUEST_STATE)])
        return self._codec

    def seal(self, payload: bytes) -> str:
        return str(self._made().seal(payload))

    def unseal(self, token: str) -> bytes:
        return bytes(self._made().unseal(token))
