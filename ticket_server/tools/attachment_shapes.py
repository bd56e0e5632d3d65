"""How an attachment is described to a model (no bytes): in a full ticket read's
``attachments``, in a write's result, and in ``get_attachment``'s JSON."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from ticket_server.tickets.attachments import AttachmentRecord

ATTACHMENT_URI = "tickets://attachment/{}"


class AttachmentInfo(BaseModel):
    id: int
    name: str
    media_type: str
    size: int
    uploader: str
    untrusted: bool  # a customer uploaded it
    created_at: datetime


class AttachmentList(BaseModel):
    # newest first; total counts them all.
    items: list[AttachmentInfo]
    total: int
    truncated: bool


def info(record: AttachmentRecord) -> AttachmentInfo:
    return AttachmentInfo(
        id=record.id,
        name=record.name,
        media_type=record.media_type,
        size=record.size,
        uploader=record.uploader,
        untrusted=record.untrusted,
        created_at=record.created_at,
    )
