"""Where attachment bytes live: one small interface, two stores.

A store keeps contents by their SHA-256 (hex), so the same bytes are stored once. A
write hands a new content to the store twice: ``stage`` before the write's transaction
(the object store uploads it there: content-addressed, so a retry or a refused write
leaves at most one unreferenced object, never a wrong one) and ``keep`` inside it (the
database store writes its chunk rows there, so a refused write stores nothing). ``read``
returns the bytes of one content, ``read_base64`` its base64 (RFC 4648), encoded a chunk
at a time as it is read: the file is then never whole in memory beside its base64. Both
check what they read as it passes (``verified``: bytes, the recorded size, the SHA-256
it is kept under) and give nothing of a content that fails (``BlobMissing``).

- ``DatabaseStore`` (the default): ``attachment_chunks`` rows of at most ``CHUNK_BYTES``
  in the ticket database; works on both engines and across replicas, nothing else to run.
- ``S3Store``: an object per content in an S3-compatible bucket (boto3, in a worker
  thread), for a deployment whose files outgrow its database.
"""

from __future__ import annotations

import asyncio
import binascii
import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy import Connection, LargeBinary, bindparam, case, func, insert, select, type_coerce

from ticket_server.tickets.attachment_models import CHUNK_BYTES, AttachmentChunk

if TYPE_CHECKING:
    from ticket_server.settings import Settings
    from ticket_server.tickets.repository import TicketRepository

_CHUNKS = AttachmentChunk.__table__
T = TypeVar("T")


class BlobStore(Protocol):
    """Attachment contents by SHA-256 (hex)."""

    name: str
    """What ``attachment_blobs.store`` records: ``database`` or ``s3``."""

    async def stage(self, sha256: str, data: bytes) -> None:
        """Before the write's transaction: make ``data`` available under ``sha256``."""

    def keep(self, conn: Connection, sha256: str, data: bytes) -> None:
        """Inside the write's transaction, for a digest not stored yet."""

    async def read(self, sha256: str, size: int) -> bytes:
        """The ``size`` bytes stored under ``sha256``."""

    async def read_base64(self, sha256: str, size: int) -> str:
        """The base64 of the ``size`` bytes stored under ``sha256``."""

    async def read_head(self, sha256: str, size: int, limit: int) -> bytes:
        """The first ``limit`` of the ``size`` bytes stored under ``sha256``, every byte
        checked (``verified``) and none kept beyond them."""


class BlobMissing(Exception):
    """A content the store cannot give as it was stored: not there (deleted behind the
    server's back), of another size, not bytes, or altered (its SHA-256 differs)."""

    def __init__(self, sha256: str, reason: str = "not in the store") -> None:
        super().__init__(sha256, reason)
        self.sha256 = sha256
        self.reason = reason


def verified(chunks: Iterable[object], sha256: str, size: int) -> Iterator[bytes]:
    """``chunks`` as they come, checked as they pass to be bytes, exactly ``size`` of them,
    whose SHA-256 (hashed a chunk at a time, none kept) is ``sha256``: ``BlobMissing`` at
    a chunk that is not bytes or passes ``size``, or at their end when short of it or of
    another digest. A reader must consume them all before it sends anything."""
    digest, total = hashlib.sha256(), 0
    for chunk in chunks:
        if not isinstance(chunk, bytes):
            raise BlobMissing(sha256, f"a stored part is {type(chunk).__name__}, not bytes")
        total += len(chunk)
        if total > size:
            raise BlobMissing(sha256, f"longer than its {size} bytes")
        digest.update(chunk)
        yield chunk
    if total != size:
        raise BlobMissing(sha256, f"{total} bytes of its {size}")
    if digest.hexdigest() != sha256.lower():
        raise BlobMissing(sha256, "its bytes do not match its SHA-256")


def head(chunks: Iterable[bytes], limit: int) -> bytes:
    """The first ``limit`` bytes of ``chunks``, read to their end (so that ``verified``
    checks every one) without keeping the rest."""
    kept = bytearray()
    for chunk in chunks:
        if len(kept) < limit:
            kept += chunk[: limit - len(kept)]
    return bytes(kept)


def base64_of(chunks: Iterable[bytes]) -> str:
    """The base64 (RFC 4648, no line breaks) of ``chunks`` joined, encoded a chunk at a
    time (each cut at a multiple of 3 bytes, the rest carried to the next)."""
    pieces, carry = [], b""
    for chunk in chunks:
        block = carry + chunk if carry else chunk
        cut = len(block) - len(block) % 3
        pieces.append(binascii.b2a_base64(memoryview(block)[:cut], newline=False).decode())
        carry = block[cut:]
    pieces.append(binascii.b2a_base64(carry, newline=False).decode())
    return "".join(pieces)


_KEY = (_CHUNKS.c.sha256 == bindparam("sha256"), _CHUNKS.c.seq == bindparam("seq"))
_DATA = _CHUNKS.c.data
_CHUNK = select(_DATA).where(*_KEY)
_CHUNK_SQLITE = select(
    type_coerce(case((func.typeof(_DATA) == "blob", _DATA), else_=func.typeof(_DATA)), LargeBinary)
).where(*_KEY)
"""SQLite lets a column hold any type: a part that is not a BLOB comes back as the name of
its type (a str, which ``verified`` refuses), where a TEXT one would come as a str, or
fail in the driver (not UTF-8) as if the database were down."""


def _chunks(conn: Connection, sha256: str) -> Iterator[object]:
    """The chunk rows of a content in order, one statement each (by its key) until the
    next is missing: a driver that buffers a result (asyncpg through SQLAlchemy) would
    otherwise hold every chunk at once. The readers check them (``verified``)."""
    stmt = _CHUNK_SQLITE if conn.dialect.name == "sqlite" else _CHUNK
    seq = 0
    while (chunk := conn.execute(stmt, {"sha256": sha256, "seq": seq}).scalar()) is not None:
        yield chunk
        seq += 1


class DatabaseStore:
    """Chunk rows in the ticket database, written in the write's own transaction."""

    name = "database"

    def __init__(self, repository: TicketRepository | None = None) -> None:
        self.repository = repository  # None: a store that only writes (seeding)

    async def stage(self, sha256: str, data: bytes) -> None:
        return None  # written with the rest of the write, in ``keep``

    def keep(self, conn: Connection, sha256: str, data: bytes) -> None:
        view = memoryview(data)
        for seq, start in enumerate(range(0, max(len(view), 1), CHUNK_BYTES)):
            # One chunk copied at a time: a statement never carries the whole file. The
            # values go as execution parameters, not in the statement: SQLAlchemy's
            # statement cache keeps the first statement of each shape, with its values.
            conn.execute(
                insert(_CHUNKS),
                {"sha256": sha256, "seq": seq, "data": bytes(view[start : start + CHUNK_BYTES])},
            )

    async def read(self, sha256: str, size: int) -> bytes:
        return await self._read(
            lambda conn: b"".join(verified(_chunks(conn, sha256), sha256, size))
        )

    async def read_base64(self, sha256: str, size: int) -> str:
        return await self._read(
            lambda conn: base64_of(verified(_chunks(conn, sha256), sha256, size))
        )

    async def read_head(self, sha256: str, size: int, limit: int) -> bytes:
        return await self._read(
            lambda conn: head(verified(_chunks(conn, sha256), sha256, size), limit)
        )

    async def _read(self, work: Callable[[Connection], T]) -> T:
        if self.repository is None:
            raise RuntimeError("a DatabaseStore without a repository cannot read")
        return await self.repository.read(work)


class S3Store:
    """One object per content, ``<prefix><sha256>``, in an S3-compatible bucket."""

    name = "s3"

    def __init__(
        self, bucket: str, *, endpoint_url: str | None = None, prefix: str = "attachments/"
    ) -> None:
        import boto3

        self.bucket = bucket
        self.prefix = prefix
        self._client: Any = boto3.client("s3", endpoint_url=endpoint_url)

    def _key(self, sha256: str) -> str:
        return f"{self.prefix}{sha256}"

    async def stage(self, sha256: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        def put() -> None:
            try:
                self._client.head_object(Bucket=self.bucket, Key=self._key(sha256))
                return  # content-addressed: already there
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey"):
                    raise
            self._client.put_object(Bucket=self.bucket, Key=self._key(sha256), Body=data)

        await asyncio.to_thread(put)

    def keep(self, conn: Connection, sha256: str, data: bytes) -> None:
        return None  # uploaded before the transaction, in ``stage``

    def _body(self, sha256: str) -> Any:
        """The object's body (a botocore ``StreamingBody``); ``BlobMissing`` when the bucket
        has none. It blocks: a worker thread calls it."""
        from botocore.exceptions import ClientError

        try:
            return self._client.get_object(Bucket=self.bucket, Key=self._key(sha256))["Body"]
        except ClientError as exc:
            raise BlobMissing(sha256) from exc

    async def read(self, sha256: str, size: int) -> bytes:
        def get() -> bytes:
            return b"".join(verified([self._body(sha256).read()], sha256, size))

        return await asyncio.to_thread(get)

    async def read_base64(self, sha256: str, size: int) -> str:
        def get() -> str:
            chunks = self._body(sha256).iter_chunks(CHUNK_BYTES)
            return base64_of(verified(chunks, sha256, size))

        return await asyncio.to_thread(get)

    async def read_head(self, sha256: str, size: int, limit: int) -> bytes:
        def get() -> bytes:
            chunks = self._body(sha256).iter_chunks(CHUNK_BYTES)
            return head(verified(chunks, sha256, size), limit)

        return await asyncio.to_thread(get)


def open_store(settings: Settings, repository: TicketRepository) -> BlobStore:
    """The store ``settings.attachment_store`` names."""
    if settings.attachment_store == "s3":
        if not settings.attachment_s3_bucket:
            raise ValueError("TICKET_SERVER_ATTACHMENT_S3_BUCKET is required with the s3 store")
        return S3Store(
            settings.attachment_s3_bucket,
            endpoint_url=settings.attachment_s3_endpoint_url,
            prefix=settings.attachment_s3_prefix,
        )
    return DatabaseStore(repository)
