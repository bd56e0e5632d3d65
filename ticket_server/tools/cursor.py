"""Opaque, tamper-evident page cursors for search_tickets_v2 and get_ticket.

A cursor is ``base64url(AES-SIV(JSON position))`` (RFC 5297, deterministic authenticated
encryption: one position gives one cursor): the position says where the last page
ended, the fingerprint ties it to the search that made it, and the synthetic IV (a
128-bit tag) makes any edit detectable. It is
encrypted, not only signed, because a position holds the last ticket's rank, whose
word weights count the tickets of every queue: a caller limited to queues must not
read them. A cursor carries no authorization: the caller's queue scope is applied to
every page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

if TYPE_CHECKING:  # search.py needs SQLAlchemy: imported on the first search
    from ticket_server.tickets.search import Position

MAX_CURSOR_LENGTH = 512
_TAG_BYTES = 16
_KEY_LIMIT = 2**63


class CursorError(ValueError):
    """A cursor that is malformed, tampered with, or from another search."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fingerprint(**search: Any) -> str:
    """A short digest of everything that defines a search (query terms and filters)."""
    canonical = json.dumps(search, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _key(value: Any) -> int:
    """A non-negative integer that fits a database key (a signed 64-bit integer)."""
    if type(value) is not int or not 0 <= value < _KEY_LIMIT:
        raise CursorError("not a key")
    return value


class CursorCodec:
    def __init__(self, key: bytes | Callable[[], bytes]) -> None:
        """``key``: the cursor key (``access.sealing.Use.CURSOR``), or a function giving
        it on first use (called for each cursor: keep it cached)."""
        self._key = key if callable(key) else (lambda: key)

    def _aead(self) -> AESSIV:
        return AESSIV(self._key())

    def encode(self, position: Position, search: str) -> str:
        payload: dict[str, Any] = {
            "f": search,
            "k": position.pk,
            "t": position.updated_at.isoformat(),
        }
        if position.rank is not None:
            payload["r"] = position.rank
        body = json.dumps(payload, separators=(",", ":")).encode()
        return _b64(self._aead().encrypt(body, None))

    def decode(self, cursor: str, search: str) -> Position:
        """The position in ``cursor``; ``CursorError`` unless it is intact and was made by
        this server for the same ``search`` fingerprint (which fixes the sort, hence
        which parts of the sort key the position holds)."""
        from ticket_server.tickets.search import Position

        try:
            if len(cursor) > MAX_CURSOR_LENGTH:
                raise CursorError("too long")
            sealed = _unb64(cursor)
            if len(sealed) <= _TAG_BYTES:
                raise CursorError("too short")
            try:
                body = self._aead().decrypt(sealed, None)
            except InvalidTag as exc:
                raise CursorError("bad tag") from exc
            payload = json.loads(body)
            if payload["f"] != search:
                raise CursorError("other search")
            pk = _key(payload["k"])
            updated_at = datetime.fromisoformat(payload["t"])
            if updated_at.tzinfo is None:
                raise CursorError("naive time")
            rank = _key(payload["r"]) if "r" in payload else None
        except CursorError:
            raise
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError) as exc:
            raise CursorError("malformed") from exc
        return Position(updated_at=updated_at, pk=pk, rank=rank)
