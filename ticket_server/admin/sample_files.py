"""The sample's attachments, made by code (no downloads), byte for byte the same on every
run: a small PNG screenshot, a one-page PDF invoice and a CSV export, uploaded by the
customers of every ``EVERY``-th ticket (by key), so the sample shows files on tickets
(customer uploads: untrusted). The three contents are stored once each, however many
tickets carry them (the store keys by SHA-256)."""

from __future__ import annotations

import hashlib
import struct
import zlib
from datetime import datetime
from functools import cache

from sqlalchemy import Connection, select

EVERY = 40
"""One ticket in this many (by key) gets a sample attachment."""


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


@cache
def sample_png(width: int = 64, height: int = 40) -> bytes:
    """An RGB PNG: a grey window with a red error bar, as a screenshot of an error."""
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter: none
        for x in range(width):
            if 6 <= y < 12:
                pixel = (200, 40, 40)
            elif x in (0, width - 1) or y in (0, height - 1):
                pixel = (90, 90, 90)
            else:
                shade = 235 - (x * 3 + y) % 24
                pixel = (shade, shade, shade)
            rows += bytes(pixel)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _chunk(b"IEND", b"")
    )


@cache
def sample_pdf() -> bytes:
    """A one-page PDF 1.4 invoice with a valid cross-reference table."""
    text = (
        "BT /F1 18 Tf 72 760 Td (Invoice INV-2026-0412) Tj ET\n"
        "BT /F1 11 Tf 72 730 Td (Billed to: Acme Logistics, 12 Wrong Street) Tj ET\n"
        "BT /F1 11 Tf 72 712 Td (Seats: 25 x 12.00 EUR = 300.00 EUR) Tj ET\n"
    ).encode("ascii")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length " + str(len(text)).encode() + b" >>\nstream\n" + text + b"endstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


@cache
def sample_csv() -> bytes:
    """A user import export whose last rows failed, as a customer sends it."""
    lines = ["email,name,seats,status"]
    for n in range(1, 21):
        status = "ok" if n <= 17 else "error: duplicate email"
        lines.append(f"user{n:02d}@example.com,User {n:02d},{1 + n % 3},{status}")
    return ("\n".join(lines) + "\n").encode("utf-8")


SAMPLES = (
    ("screenshot.png", "image/png", sample_png),
    ("invoice.pdf", "application/pdf", sample_pdf),
    ("users-export.csv", "text/csv", sample_csv),
)


def add_sample_attachments(conn: Connection) -> int:
    """Attach a sample file to every ``EVERY``-th ticket without attachments, in the
    seeding transaction (database store); returns how many were added."""
    from ticket_server.tickets.attachments import Attaching, Upload, attach, detect
    from ticket_server.tickets.blobstore import DatabaseStore
    from ticket_server.tickets.domain import AuthorType
    from ticket_server.tickets.models import Ticket

    t = Ticket.__table__
    rows = conn.execute(
        select(t.c.pk, t.c.id, t.c.customer, t.c.created_at)
        .where(t.c.pk % EVERY == EVERY // 2)
        .order_by(t.c.pk)
    ).all()
    store = DatabaseStore()
    added = 0
    for number, row in enumerate(rows):
        name, media_type, make = SAMPLES[number % len(SAMPLES)]
        data = make()
        assert detect(data) == media_type
        upload = Upload(name, media_type, data, hashlib.sha256(data).hexdigest())
        when: datetime = row.created_at
        files = Attaching([upload], store, 1 << 62, True, AuthorType.CUSTOMER)
        added += len(attach(conn, row.id, None, files, row.customer, when))
    return added
