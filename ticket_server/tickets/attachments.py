"""Attachments in the domain: an upload checked (size, detected type), the rows a write
adds in its own transaction, and the reads of a ticket's list and of one file.

The media type comes from the bytes (puremagic's signatures; text that is valid UTF-8
without NUL bytes is JSON, CSV or plain text by its content), never from the name: a
PNG named ``invoice.pdf`` is an ``image/png``. Each refusal is one sentence a model can
act on, and nothing is stored.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, func, insert, select

from ticket_server.tickets.attachment_models import Attachment, AttachmentBlob
from ticket_server.tickets.blobstore import BlobStore
from ticket_server.tickets.domain import AuthorType, WriteRefused
from ticket_server.tickets.models import Ticket
from ticket_server.tickets.storage import dialect_insert

_ATTACHMENTS, _BLOBS, _TICKETS = Attachment.__table__, AttachmentBlob.__table__, Ticket.__table__
MAX_NAME = 255
TEXT_SNIFF_BYTES = 64 * 1024
"""How much of a text file decides between CSV and plain text."""


class AttachmentRefused(WriteRefused):
    """An attachment too large, of a refused type, or malformed; nothing was changed."""

    reason = "attachment refused"


@dataclass(frozen=True)
class Upload:
    """One file checked and ready to store: its bytes, digest and detected type."""

    name: str
    media_type: str
    data: bytes
    sha256: str

    @property
    def size(self) -> int:
        return len(self.data)

    def digest(self) -> dict[str, object]:
        """What the audit keeps of it: never the bytes."""
        return {
            "name": self.name,
            "media_type": self.media_type,
            "size": self.size,
            "sha256": self.sha256,
        }


class AttachmentRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    ticket_id: str
    comment_pk: int | None
    name: str
    media_type: str
    size: int
    sha256: str
    uploader: str
    uploader_type: AuthorType
    untrusted: bool
    created_at: datetime
    store: str = "database"
    """The store holding the bytes (``attachment_blobs.store``), read when found by id."""


_COLUMNS = [_ATTACHMENTS.c[name] for name in AttachmentRecord.model_fields if name != "store"]


WEAK_SIGNATURE = 0.4
"""puremagic's confidence below which a signature is a file's first two or three bytes
(``BM`` of a bitmap, ``MZ`` of a Windows program, ``ID3`` of an MP3, ``%!`` of
PostScript): text may open so too ("BMW ..."), so such a match counts only for bytes
that do not read as text."""


def detect(data: bytes) -> str:
    """The media type of ``data``, from its bytes alone."""
    import puremagic

    found, weak = "", False
    if data:
        try:
            best = puremagic.magic_string(data)[0]
            found, weak = str(best.mime_type or ""), best.confidence < WEAK_SIGNATURE
        except (puremagic.PureError, ValueError, IndexError):
            pass
        if found and not weak:
            return found
    return _text_type(data) or found or "application/octet-stream"


def _text_type(data: bytes) -> str | None:
    """JSON, CSV or plain text, as ``data`` reads (UTF-8, or UTF-16 after its byte-order
    mark); None when it does not read as text."""
    head = bytes(data[:TEXT_SNIFF_BYTES])
    utf16 = head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))  # RFC 2781 3.2
    if utf16:
        head = head[: len(head) // 2 * 2]
    elif b"\x00" in head:
        return None
    codec = "utf-16" if utf16 else "utf-8"
    try:
        text = head.decode(codec)
    except UnicodeDecodeError as exc:
        # Forgiven only for a character cut by the sniff's own end, the file going on.
        if len(data) <= len(head) or exc.reason != "unexpected end of data":
            return None
        text = head[: exc.start].decode(codec)
    if "\x00" in text:
        return None
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(bytes(data))
            return "application/json"
        except (ValueError, RecursionError):  # nested past the reader's recursion: text
            pass
    return "text/csv" if _looks_like_csv(text) else "text/plain"


def _looks_like_csv(text: str) -> bool:
    """Two or more lines of one field count above one, split by commas, semicolons or tabs."""
    lines = [line for line in text.splitlines()[:20] if line.strip()]
    if len(lines) < 2:
        return False
    if len(text) >= TEXT_SNIFF_BYTES:
        lines = lines[:-1]  # the last may be cut short
    for delimiter in (",", ";", "\t"):
        counts = {
            len(row) for row in csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
        }
        if len(counts) == 1 and counts.pop() > 1:
            return True
    return False


def clean_name(name: str) -> str:
    """The file name as stored: its last path part, without control characters; empty
    when that names no file (nothing, ``.``, ``..``)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip()
    return "" if base in (".", "..") else base[:MAX_NAME]


def check_upload(
    name: str, data: bytes, *, allowed: Sequence[str], max_bytes: int, label: str
) -> Upload:
    """``data`` as an ``Upload``, or ``AttachmentRefused`` saying why (``label`` names it)."""
    shown = clean_name(name)
    if not shown:
        raise AttachmentRefused(f"{label} has no file name; give one. Nothing was changed.")
    if len(data) > max_bytes:
        raise AttachmentRefused(
            f"{label} ({shown!r}) is {len(data):,} bytes, over the limit of {max_bytes:,} "
            "bytes per file; nothing was changed."
        )
    if not data:
        raise AttachmentRefused(f"{label} ({shown!r}) is empty; nothing was changed.")
    media_type = detect(data)
    if media_type not in allowed:
        raise AttachmentRefused(
            f"{label} ({shown!r}) is {media_type} by its content, which is not accepted; "
            f"accepted: {', '.join(allowed)}. Nothing was changed."
        )
    return Upload(shown, media_type, data, hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class Attaching:
    """Files a write adds, with what the write needs to store them."""

    uploads: Sequence[Upload]
    store: BlobStore
    ticket_max_bytes: int
    untrusted: bool = False
    uploader_type: AuthorType = AuthorType.AGENT


def attach(
    conn: Connection,
    ticket_id: str,
    comment_pk: int | None,
    attaching: Attaching,
    uploader: str,
    now: datetime,
) -> list[AttachmentRecord]:
    """Inside a write's transaction: check the ticket's total against its limit, store each
    content not stored yet (once per digest), add one ``attachments`` row per file."""
    if not attaching.uploads:
        return []
    held = conn.execute(
        select(func.coalesce(func.sum(_ATTACHMENTS.c.size), 0)).where(
            _ATTACHMENTS.c.ticket_id == ticket_id
        )
    ).scalar_one()
    adding = sum(u.size for u in attaching.uploads)
    if int(held) + adding > attaching.ticket_max_bytes:
        raise AttachmentRefused(
            f"Ticket {ticket_id} holds {int(held):,} bytes of attachments; these {adding:,} "
            f"more would pass its limit of {attaching.ticket_max_bytes:,} bytes. Nothing was "
            "changed."
        )
    records = []
    for upload in attaching.uploads:
        # ON CONFLICT: a write storing the same new content at once (PostgreSQL writes
        # other tickets side by side) waits for this row and then finds it, never breaks
        # its key; the one that added the row stores the content.
        added = conn.execute(
            dialect_insert(conn)(_BLOBS)
            .values(
                sha256=upload.sha256,
                size=upload.size,
                store=attaching.store.name,
                created_at=now,
            )
            .on_conflict_do_nothing(index_elements=[_BLOBS.c.sha256])
        ).rowcount
        if added:
            store = attaching.store.name
            attaching.store.keep(conn, upload.sha256, upload.data)
        else:
            store = conn.execute(
                select(_BLOBS.c.store).where(_BLOBS.c.sha256 == upload.sha256)
            ).scalar_one()
        values = {
            "ticket_id": ticket_id,
            "comment_pk": comment_pk,
            "name": upload.name,
            "media_type": upload.media_type,
            "size": upload.size,
            "sha256": upload.sha256,
            "uploader": uploader,
            "uploader_type": attaching.uploader_type,
            "untrusted": attaching.untrusted,
            "created_at": now,
        }
        key = conn.execute(insert(_ATTACHMENTS).values(**values)).inserted_primary_key
        assert key is not None
        records.append(AttachmentRecord(id=key[0], store=store, **values))
    return records


def ticket_attachments(
    conn: Connection, ticket_id: str, limit: int
) -> tuple[list[AttachmentRecord], int]:
    """The newest ``limit`` attachments of ``ticket_id`` and how many it has."""
    rows = conn.execute(
        select(*_COLUMNS)
        .where(_ATTACHMENTS.c.ticket_id == ticket_id)
        .order_by(_ATTACHMENTS.c.created_at.desc(), _ATTACHMENTS.c.id.desc())
        .limit(limit)
    ).mappings()
    found = [AttachmentRecord.model_validate(dict(row)) for row in rows]
    total = (
        len(found)
        if len(found) < limit
        else conn.execute(
            select(func.count()).where(_ATTACHMENTS.c.ticket_id == ticket_id)
        ).scalar_one()
    )
    return found, int(total)


def find_attachment(
    conn: Connection, attachment_id: int, queues: frozenset[str] | None
) -> AttachmentRecord | None:
    """Attachment ``attachment_id`` when its ticket is in ``queues`` (None: any), else None."""
    stmt = (
        select(*_COLUMNS, _BLOBS.c.store)
        .select_from(
            _ATTACHMENTS.join(_TICKETS, _TICKETS.c.id == _ATTACHMENTS.c.ticket_id).join(
                _BLOBS, _BLOBS.c.sha256 == _ATTACHMENTS.c.sha256
            )
        )
        .where(_ATTACHMENTS.c.id == attachment_id)
    )
    if queues is not None:
        stmt = stmt.where(_TICKETS.c.queue.in_(sorted(queues)))
    row = conn.execute(stmt).mappings().first()
    return AttachmentRecord.model_validate(dict(row)) if row is not None else None
