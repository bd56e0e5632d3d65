"""The S3-compatible attachment store against moto's standalone server (started here on
127.0.0.1, a free port): bytes round-trip exactly, the same content is one object, and a
note with a file through the server stores its bytes in the bucket, not the database;
an object whose bytes no longer match its key is refused."""

from __future__ import annotations

import base64
import hashlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastmcp import Client

from tests.access.conftest import add_caller, server_as  # noqa: F401  (fixtures)
from tests.tools.test_writes import _sql, ticket_in
from ticket_server.admin.sample_files import sample_pdf
from ticket_server.settings import Settings
from ticket_server.tickets.blobstore import BlobMissing, S3Store

BUCKET = "ticket-attachments"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 with the bucket made; its endpoint URL."""
    import boto3

    port = _free_port()
    moto = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, "moto_server exited"
                assert time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.1)
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _objects(url: str) -> list[tuple[str, int]]:
    import boto3

    listed = boto3.client("s3", endpoint_url=url).list_objects_v2(Bucket=BUCKET)
    return [(o["Key"], o["Size"]) for o in listed.get("Contents", [])]


@pytest.mark.sqlite_only  # the object store is the subject; the engine is not
async def test_s3_store_round_trip_and_a_note_through_the_server(
    s3: str, settings: Settings, add_caller, server_as
) -> None:
    store = S3Store(BUCKET, endpoint_url=s3, prefix="t/")
    data = bytes(range(256)) * 4099  # 1 MiB and a bit: more than one multipart-sized read
    digest = hashlib.sha256(data).hexdigest()
    await store.stage(digest, data)
    await store.stage(digest, data)  # content-addressed: still one object
    assert _objects(s3) == [(f"t/{digest}", len(data))]
    assert await store.read(digest, len(data)) == data
    assert await store.read_base64(digest, len(data)) == base64.b64encode(data).decode()
    for read in (store.read, store.read_base64):
        with pytest.raises(BlobMissing):
            await read("0" * 64, 1)
        for wrong in (len(data) - 1, len(data) + 1):  # both read paths check the size
            with pytest.raises(BlobMissing):
                await read(digest, wrong)
    # An object whose bytes are not those of its key (changed in the bucket), at its size:
    # both read paths hash what they read and refuse it.
    altered = hashlib.sha256(b"another content").hexdigest()
    await store.stage(altered, data)
    for read in (store.read, store.read_base64):
        with pytest.raises(BlobMissing, match="SHA-256"):
            await read(altered, len(data))

    await add_caller("agent", scopes=("tickets:read", "tickets:write"), queues=["billing"])
    server = server_as(
        stdio_caller="agent",
        confirm_writes=[],
        attachment_store="s3",
        attachment_s3_bucket=BUCKET,
        attachment_s3_endpoint_url=s3,
    )
    billing = await ticket_in(settings, "billing")
    fresh = b"email,seats\n" + b"".join(b"u%d@example.com,%d\n" % (n, n % 7) for n in range(5000))
    pdf = sample_pdf()  # the sample's: stored in the database already, and read from there
    chunks = (await _sql(settings, "SELECT count(*) FROM attachment_chunks"))[0][0]
    async with Client(server) as client:
        result = await client.call_tool(
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "export and invoice",
                "attachments": [
                    {"name": "users.csv", "content_base64": base64.b64encode(fresh).decode()},
                    {"name": "inv.pdf", "content_base64": base64.b64encode(pdf).decode()},
                ],
            },
        )
        files = result.structured_content["attachments"]
        assert [f["media_type"] for f in files] == ["text/csv", "application/pdf"]
        for file, data in zip(files, [fresh, pdf], strict=True):
            (content,) = await client.read_resource(f"tickets://attachment/{file['id']}")
            assert base64.b64decode(content.blob) == data
    fresh_sha = hashlib.sha256(fresh).hexdigest()
    assert (f"attachments/{fresh_sha}", len(fresh)) in _objects(s3)
    assert (await _sql(settings, "SELECT count(*) FROM attachment_chunks"))[0][0] == chunks
    stores = await _sql(
        settings,
        "SELECT sha256, store FROM attachment_blobs WHERE sha256 IN (:a, :b)",
        a=fresh_sha,
        b=hashlib.sha256(pdf).hexdigest(),
    )
    assert dict(stores) == {fresh_sha: "s3", hashlib.sha256(pdf).hexdigest(): "database"}
