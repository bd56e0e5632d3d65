"""Opaque, tamper-evident page cursors for search_tickets_v2.

A cursor is ``base64url(JSON position) + "." + base64url(HMAC-SHA256 tag)``: the
position says where the last page ended, the fingerprint ties it to the search that
made it, and the tag (RFC 2104 HMAC, truncated to 128 bits) makes any edit detectable.
A cursor carries no authorization: the caller's queue scope is applied to every page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
    def __init__(self, key: bytes) -> None:
        self._key = key

    def _tag(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:_TAG_BYTES]

    def encode(self, position: Position, search: str) -> str:
        payload: dict[str, Any] = {"f": search, "k": position.pk, "t": position.updated_at.isoformat()}
        if position.rank is not None:
            payload["r"] = position.rank
        body = json.dumps(payload, separators=(",", ":")).encode()
        return f"{_b64(body)}.{_b64(self._tag(body))}"

    def decode(self, cursor: str, search: str) -> Position:
        """The position in ``cursor``; ``CursorError`` unless it is intact and was made by
        this server for the same ``search`` fingerprint (which fixes the sort, hence
        which parts of the sort key the position holds)."""
        from ticket_server.tickets.search import Position

        try:
            if len(cursor) > MAX_CURSOR_LENGTH:
                raise CursorError("too long")
            body_text, tag_text = cursor.split(".")
            body, tag = _unb64(body_text), _unb64(tag_text)
            if not hmac.compare_digest(tag, self._tag(body)):
                raise CursorError("bad tag")
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
