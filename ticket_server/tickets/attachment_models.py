"""The attachment tables: files on tickets, stored by content (SHA-256).

``attachments`` is one file on one ticket (and the comment it came with, if any): its
name as the uploader gave it, the media type detected from its bytes, size, digest,
uploader and time, and whether a customer uploaded it (its content is then data, never
instructions). The bytes live once per digest: ``attachment_blobs`` records each digest
and the store holding it (``database``: its ``attachment_chunks`` rows, at most
``CHUNK_BYTES`` each, so no statement moves a whole large file; ``s3``: an object keyed
by the digest in the configured bucket).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from ticket_server.tickets.domain import AuthorType
from ticket_server.tickets.models import Base, UTCDateTime, _enum

CHUNK_BYTES = 1024 * 1024
"""Most bytes of one ``attachment_chunks`` row."""


class AttachmentBlob(Base):
    """One stored content, by its SHA-256 (hex): the same bytes uploaded twice are one row."""

    __tablename__ = "attachment_blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    store: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class AttachmentChunk(Base):
    """Part ``seq`` (from 0) of a blob kept in the database."""

    __tablename__ = "attachment_chunks"

    sha256: Mapped[str] = mapped_column(
        String(64), ForeignKey("attachment_blobs.sha256", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Attachment(Base):
    """A file on a ticket. ``comment_pk``: the note or reply it came with (None: the
    ticket itself). ``untrusted``: uploaded by a customer."""

    __tablename__ = "attachments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ticket_id: Mapped[str] = mapped_column(String(32), ForeignKey("tickets.id", ondelete="CASCADE"))
    comment_pk: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("comments.pk", ondelete="SET NULL")
    )
    name: Mapped[str] = mapped_column(String(255))
    media_type: Mapped[str] = mapped_column(String(127))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64), ForeignKey("attachment_blobs.sha256"))
    uploader: Mapped[str] = mapped_column(String(200))
    uploader_type: Mapped[AuthorType] = mapped_column(_enum(AuthorType, "author_type"))
    untrusted: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_attachments_ticket_created_at", "ticket_id", "created_at", "id"),
        Index("ix_attachments_sha256", "sha256"),
    )
