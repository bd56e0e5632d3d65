"""Attachments through the in-memory client, on SQLite and PostgreSQL, in both protocol
revisions: upload with a note or a reply and read back byte for byte, the same bytes
stored once, the limits and refused types (nothing stored), a PNG named .pdf detected as
PNG, another queue's caller neither reads nor lists it, the audit holds digests, customer
uploads labelled untrusted, images downscaled."""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import re
from typing import Any

import pytest
from fastmcp import Client
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import call_any
from tests.services import redis_server, redis_url  # noqa: F401  (fixtures)
from tests.tools.test_writes import _sql, ticket_in
from ticket_server.admin.sample_files import sample_csv, sample_pdf, sample_png
from ticket_server.settings import Settings

AGENT_SCOPES = ("tickets:read", "tickets:write")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
async def agent(settings: Settings, add_caller, server_as):
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    await add_caller("other", scopes=AGENT_SCOPES, queues=["support"])
    return server_as(
        stdio_caller="agent",
        confirm_writes=[],
        attachment_max_bytes=2_000_000,
        attachment_ticket_max_bytes=3_000_000,
    )


async def note_with(client: Client, ticket_id: str, name: str, data: bytes) -> dict[str, Any]:
    """``add_internal_note`` with one file: the attachment as the result lists it."""
    result = await client.call_tool(
        "add_internal_note",
        {
            "ticket_id": ticket_id,
            "note": f"{name} attached",
            "attachments": [{"name": name, "content_base64": b64(data)}],
        },
    )
    (attachment,) = result.structured_content["attachments"]
    return attachment


async def stored(settings: Settings) -> tuple[int, int, int]:
    """Rows of attachments, blobs and chunks."""
    counts = []
    for table in ("attachments", "attachment_blobs", "attachment_chunks"):
        counts.append((await _sql(settings, f"SELECT count(*) FROM {table}"))[0][0])
    return tuple(counts)  # type: ignore[return-value]


async def read_resource(client: Client, uri: str) -> tuple[bytes, str | None, Any]:
    contents = await client.read_resource(uri)
    (content,) = contents
    return base64.b64decode(content.blob), content.mimeType, content


async def test_round_trip_dedup_listing_and_audit(settings: Settings, agent, mode: str) -> None:
    billing = await ticket_in(settings, "billing")
    pdf, csv, png = sample_pdf(), sample_csv(), sample_png()
    held = (
        await _sql(settings, "SELECT count(*) FROM attachments WHERE ticket_id = :t", t=billing)
    )[0][0]
    async with Client(agent, mode=mode) as client:
        result = await client.call_tool(
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "Invoice and export attached.",
                "attachments": [
                    {"name": "invoice.pdf", "content_base64": b64(pdf)},
                    {"name": "C:\\exports\\import.csv", "content_base64": b64(csv)},
                    {
                        "type": "resource",
                        "resource": {"uri": "file:///tmp/screen.png", "blob": b64(png)},
                    },
                ],
            },
        )
        files = result.structured_content["attachments"]
        assert [(f["name"], f["media_type"], f["size"]) for f in files] == [
            ("invoice.pdf", "application/pdf", len(pdf)),
            ("import.csv", "text/csv", len(csv)),
            ("screen.png", "image/png", len(png)),
        ]
        assert all(f["untrusted"] is False and f["uploader"] == "agent" for f in files)
        for f, data in zip(files, [pdf, csv, png], strict=True):
            back, mime, _ = await read_resource(client, f"tickets://attachment/{f['id']}")
            assert back == data and mime == f["media_type"]
        # The same bytes again, on a reply: a new attachment, no new blob.
        before = await stored(settings)
        await client.call_tool(
            "reply_to_customer",
            {
                "ticket_id": billing,
                "reply": "Here is the corrected invoice.",
                "attachments": [{"name": "again.pdf", "content_base64": b64(pdf)}],
            },
        )
        after = await stored(settings)
        assert after == (before[0] + 1, before[1], before[2])
        listed = (await client.call_tool("get_ticket", {"ticket_id": billing})).structured_content
        assert listed["attachments"]["total"] == after[0] - before[0] + 3 + held
        assert listed["attachments"]["items"][0]["name"] == "again.pdf"
        assert "content_base64" not in json.dumps(listed)
        only = await client.call_tool(
            "get_ticket", {"ticket_id": billing, "fields": ["attachments"]}
        )
        assert set(only.structured_content) == {"id", "attachments"}
    rows = [r for r in await audit_rows(settings, caller="agent") if r.tool == "add_internal_note"]
    (row,) = rows
    assert b64(pdf)[:40] not in row.arguments and b64(pdf)[:40] not in row.change
    assert json.loads(row.arguments)["attachments"] == "[redacted]"
    digests = json.loads(row.change)["after"]["attachments"]
    assert [(d["sha256"], d["size"]) for d in digests] == [
        (hashlib.sha256(d).hexdigest(), len(d)) for d in (pdf, csv, png)
    ]


async def test_refusals_store_nothing(settings: Settings, agent, mode: str) -> None:
    billing = await ticket_in(settings, "billing")
    before = await stored(settings)
    big = b"a," * 1_000_001
    cases = [
        ({"name": "x.bin", "content_base64": "not base64!"}, "not valid base64"),
        ({"name": "big.csv", "content_base64": b64(big)}, "over the limit of 2,000,000 bytes"),
        ({"name": "tool.exe", "content_base64": b64(b"MZ\x90\x00" + bytes(300))}, "not accepted"),
        ({"name": "empty.txt", "content_base64": ""}, "is empty"),
        (
            {"type": "resource", "resource": {"uri": "file:///a.txt"}},
            "without exactly one of blob or text",
        ),
    ]
    async with Client(agent, mode=mode) as client:
        for attachment, expected in cases:
            is_error, text = await call_any(
                client,
                "add_internal_note",
                {"ticket_id": billing, "note": "n", "attachments": [attachment]},
            )
            assert is_error and expected in text, text
            assert "Nothing was changed" in text or "nothing was changed" in text
        # Per ticket: two files of 1.6 MB each pass one by one, not together on one ticket.
        one = b64(b"b;" * 800_000)
        ok = await client.call_tool(
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "n",
                "attachments": [{"name": "1.csv", "content_base64": one}],
            },
        )
        assert not ok.is_error
        comments = await _sql(
            settings, "SELECT count(*) FROM comments WHERE ticket_id = :t", t=billing
        )
        is_error, text = await call_any(
            client,
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "n",
                "attachments": [{"name": "2.csv", "content_base64": b64(b"c;" * 800_000)}],
            },
        )
        assert is_error and "limit of 3,000,000 bytes" in text, text
        assert (
            await _sql(settings, "SELECT count(*) FROM comments WHERE ticket_id = :t", t=billing)
        ) == comments
    assert await stored(settings) == (before[0] + 1, before[1] + 1, before[2] + 2)
    details = [r.detail for r in await audit_rows(settings, caller="agent")]
    assert details.count("attachment refused") == len(cases) + 1


async def test_a_bad_field_of_an_upload_is_named_by_its_path(settings: Settings, agent) -> None:
    """A field inside an upload is named by its path, in one sentence: a review found
    "'attachments' is required" for a missing name (the attachments were sent), and two
    contradicting clauses for an empty one."""
    billing = await ticket_in(settings, "billing")
    before = await stored(settings)
    cases = [
        ({"content_base64": "QQ=="}, "'attachments[0].name' is required. Nothing was done."),
        ({"name": "", "content_base64": "QQ=="}, "'attachments[0].name': String should have"),
    ]
    async with Client(agent) as client:
        for attachment, expected in cases:
            is_error, text = await call_any(
                client,
                "add_internal_note",
                {"ticket_id": billing, "note": "n", "attachments": [attachment]},
            )
            assert is_error and expected in text and text.count("attachments") == 1, text
    assert await stored(settings) == before


async def test_an_upload_of_one_form_is_told_of_that_form(settings: Settings, agent) -> None:
    """An embedded resource whose `type` is misspelt is told of its `type`, the field it
    sent wrong, not that the other form's `name` is required (a review's finding: both
    forms' errors lie as deep, and the first form's was worded)."""
    billing = await ticket_in(settings, "billing")
    upload = {"type": "resources", "resource": {"uri": "file:///a.txt", "text": "A"}}
    async with Client(agent) as client:
        is_error, text = await call_any(
            client,
            "add_internal_note",
            {"ticket_id": billing, "note": "n", "attachments": [upload]},
        )
    assert is_error and "'attachments[0].type'" in text and "'resources'" in text, text
    assert "name" not in text, text


async def test_an_embedded_resource_is_named_by_its_uris_path_as_decoded(
    settings: Settings, agent
) -> None:
    """An embedded resource's name is its URI's last path part, percent-decoded (RFC 3986:
    a file URI spells a space or an accent that way), without its query or fragment; a
    URI of no file name is refused as a nameless upload is. A review found
    `file:///caf%C3%A9%20menu.txt` stored as `caf%C3%A9%20menu.txt`, `file:///` as
    `file:`, and `file:///a.txt?v=2` as `a.txt?v=2`."""
    billing = await ticket_in(settings, "billing")
    cases = {
        "file:///C:/Users/me/caf%C3%A9%20menu.txt": "café menu.txt",
        "file:///tmp/a.txt?v=2#top": "a.txt",
        "file:///tmp/%2E%2E%2Fsecret.txt": "secret.txt",
        "log.txt": "log.txt",
    }
    async with Client(agent) as client:
        for uri, name in cases.items():
            upload = {"type": "resource", "resource": {"uri": uri, "text": "A line.\n"}}
            done = await client.call_tool(
                "add_internal_note", {"ticket_id": billing, "note": "n", "attachments": [upload]}
            )
            assert done.structured_content["attachments"][0]["name"] == name, uri
        before = await stored(settings)
        # "." and ".." are path parts that name no file (a review found ".." stored as is).
        for uri in ("file:///", "file:///tmp/?x=a.txt", "file:///tmp/..", "..", " . "):
            upload = {"type": "resource", "resource": {"uri": uri, "text": "A line.\n"}}
            is_error, text = await call_any(
                client,
                "add_internal_note",
                {"ticket_id": billing, "note": "n", "attachments": [upload]},
            )
            assert is_error and "Attachment 1 has no file name" in text, (uri, text)
    assert await stored(settings) == before


async def test_type_from_bytes_queue_scoping_and_untrusted_label(
    settings: Settings, agent, server_as, mode: str
) -> None:
    billing = await ticket_in(settings, "billing")
    png = sample_png()
    async with Client(agent, mode=mode) as client:
        file = await note_with(client, billing, "invoice.pdf", png)
        assert file["media_type"] == "image/png"
        read = await client.call_tool("get_attachment", {"attachment_id": file["id"]})
        assert read.structured_content["content"] == "image"
        image = read.content[1]
        assert image.type == "image" and base64.b64decode(image.data) == png
    # A customer's upload (as the sample makes them): labelled untrusted when read.
    (customer_file,) = await _sql(
        settings,
        "SELECT a.id FROM attachments a JOIN tickets t ON t.id = a.ticket_id "
        "WHERE a.untrusted AND a.media_type = 'text/csv' AND t.queue = 'billing' LIMIT 1",
    )
    async with Client(agent, mode=mode) as client:
        read = await client.call_tool("get_attachment", {"attachment_id": customer_file[0]})
        body = json.loads(read.content[1].text)
        assert body["untrusted"] is True and "," in body["text"]
        assert read.meta and "dev.ticket-server/untrusted" in read.meta
    async with Client(server_as(stdio_caller="other"), mode=mode) as other:
        is_error, text = await call_any(other, "get_attachment", {"attachment_id": file["id"]})
        assert is_error and f"No attachment with id {file['id']}" in text
        missing = await call_any(other, "get_attachment", {"attachment_id": 99_999_999})
        assert missing == (True, text.replace(str(file["id"]), "99999999"))
        with pytest.raises(Exception, match="Resource not found|Unknown resource"):
            await other.read_resource(f"tickets://attachment/{file['id']}")
        is_error, _ = await call_any(other, "get_ticket", {"ticket_id": billing})
        assert is_error


async def test_an_attachment_id_is_written_one_way_only(settings: Settings, agent) -> None:
    """``tickets://attachment/{id}`` takes ASCII digits without a leading zero or spaces,
    within PostgreSQL's integer: any other spelling of an id ("²" passed ``isdigit`` and
    then failed ``int``; "٧٩", " 79", "079" named attachment 79) answers as a missing
    attachment does, and so does ``get_attachment`` of an id past 2**31 - 1."""
    billing = await ticket_in(settings, "billing")
    async with Client(agent) as client:
        file = await note_with(client, billing, "a.csv", b"a,b\n1,2\n")
        key = str(file["id"])
        uri = f"tickets://attachment/{key}"
        assert (await read_resource(client, uri))[0] == b"a,b\n1,2\n"
        arabic = key.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))

        async def refusal(spelled: str) -> tuple[type[Exception], str]:
            with pytest.raises(Exception) as refused:
                await client.read_resource(f"tickets://attachment/{spelled}")
            text = re.sub(r"'tickets://attachment/[^']*'", "URI", str(refused.value))
            return type(refused.value), text

        missing = await refusal("99999999")
        assert "not found" in missing[1]
        for spelled in (
            "²",
            arabic,
            f"0{key}",
            f"%20{key}",
            f"{key}%20",
            f"+{key}",
            "0",
            "-1",
            "2147483648",
            "999999999999",
            "1" * 40,
        ):
            assert await refusal(spelled) == missing, spelled
        assert await refusal("2147483647") == missing
        unknown = (
            "No attachment with id {}. Attachment ids come from get_ticket's attachments list."
        )
        for far in (2**31 - 1, 2**31, 2**40, 2**63):
            assert await call_any(client, "get_attachment", {"attachment_id": far}) == (
                True,
                unknown.format(far),
            )


@pytest.mark.sqlite_only  # image handling is the subject; storage runs on both engines above
async def test_an_image_of_many_bytes_is_sent_within_the_embed_bound(
    settings: Settings, agent
) -> None:
    """An image small in pixels but large in bytes (a detailed screenshot, here noise:
    800 x 800 PNG, about 1.9 MB) is not sent whole: re-encoded, and smaller if need be,
    it goes out within ``MAX_EMBED_BYTES``, the bound of any other embedded file."""
    import os

    from PIL import Image

    from ticket_server.tools.attachments import MAX_EMBED_BYTES

    billing = await ticket_in(settings, "billing")
    out = io.BytesIO()
    Image.frombytes("RGB", (800, 800), os.urandom(800 * 800 * 3)).save(out, "PNG")
    assert len(out.getvalue()) > MAX_EMBED_BYTES
    async with Client(agent) as client:
        file = await note_with(client, billing, "detailed.png", out.getvalue())
        read = await client.call_tool("get_attachment", {"attachment_id": file["id"]})
    sent = base64.b64decode(read.content[1].data)
    assert read.structured_content["content"] == "image"
    assert len(sent) <= MAX_EMBED_BYTES and len(sent) == read.structured_content["sent_bytes"]
    with Image.open(io.BytesIO(sent)) as image:
        assert image.format == read.content[1].mimeType.split("/")[1].upper()
        assert max(image.size) <= 800


@pytest.mark.sqlite_only  # image handling is the subject; storage runs on both engines above
async def test_a_large_image_is_downscaled(settings: Settings, agent) -> None:
    from PIL import Image

    billing = await ticket_in(settings, "billing")
    out = io.BytesIO()
    Image.new("RGB", (3000, 1000), (200, 30, 30)).save(out, "PNG")
    async with Client(agent) as client:
        result = await client.call_tool(
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "wide screenshot",
                "attachments": [{"name": "wide.png", "content_base64": b64(out.getvalue())}],
            },
        )
        (file,) = result.structured_content["attachments"]
        read = await client.call_tool("get_attachment", {"attachment_id": file["id"]})
        assert read.structured_content["downscaled"] is True
        with Image.open(io.BytesIO(base64.b64decode(read.content[1].data))) as sent:
            assert sent.size == (1568, 523)
        pdf = await _sql(
            settings,
            "SELECT a.id FROM attachments a JOIN tickets t ON t.id = a.ticket_id "
            "WHERE a.media_type = 'application/pdf' AND t.queue = 'billing' LIMIT 1",
        )
        read = await client.call_tool("get_attachment", {"attachment_id": pdf[0][0]})
        assert read.structured_content["content"] == "resource"
        assert read.content[1].resource.blob


def _png(size: tuple[int, int], mode: str) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new(mode, size).save(out, "PNG")
    return out.getvalue()


@pytest.mark.sqlite_only  # image handling is the subject; storage runs on both engines above
async def test_an_image_over_the_pixel_bound_is_not_decoded(
    settings: Settings, agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PNG of a few KB may declare more pixels than ``MAX_IMAGE_PIXELS`` (a
    decompression bomb): it is not decoded and comes as any other file, embedded whole;
    an image at the bound is decoded, in a worker thread, and downscaled as before."""
    import threading

    from PIL import Image

    from ticket_server.tools import attachments

    assert attachments.MAX_IMAGE_PIXELS == 4096 * 4096
    threads: list[threading.Thread] = []
    decode = attachments._image

    def spied(data: bytes, media_type: str) -> Any:
        threads.append(threading.current_thread())
        return decode(data, media_type)

    monkeypatch.setattr(attachments, "_image", spied)
    billing = await ticket_in(settings, "billing")
    bomb, at_bound = _png((4097, 4096), "1"), _png((4096, 4096), "L")
    assert len(bomb) < 20_000
    async with Client(agent) as client:
        over = await note_with(client, billing, "bomb.png", bomb)
        read = await client.call_tool("get_attachment", {"attachment_id": over["id"]})
        assert read.structured_content["content"] == "resource"
        assert read.structured_content["downscaled"] is False
        assert [c.type for c in read.content] == ["text", "resource"]
        assert base64.b64decode(read.content[1].resource.blob) == bomb
        under = await note_with(client, billing, "large.png", at_bound)
        read = await client.call_tool("get_attachment", {"attachment_id": under["id"]})
        assert read.structured_content["content"] == "image"
        assert read.structured_content["downscaled"] is True
        with Image.open(io.BytesIO(base64.b64decode(read.content[1].data))) as sent:
            assert sent.size == (1568, 1568)
    assert len(threads) == 2
    assert all(t is not threading.main_thread() for t in threads)


def _held(prefix: bytes | str) -> int:
    """How many objects of ``prefix``'s type, longer than it and starting with it, the
    process's containers hold (dicts, lists, tuples, and the dicts in them: a dict of
    strings only is not tracked by the collector), after a full collection."""
    import gc

    gc.collect()
    held = 0
    for container in gc.get_objects():
        if isinstance(container, dict):
            values: list[Any] = list(container.values())
        elif isinstance(container, list | tuple):
            values = list(container)
        else:
            continue
        values += [v for d in values if type(d) is dict for v in d.values()]
        for value in values:
            if (
                type(value) is type(prefix)
                and len(value) > len(prefix)
                and value.startswith(prefix)
            ):  # type: ignore[arg-type]
                held += 1
    return held


async def test_the_server_keeps_no_copy_of_an_uploaded_file(settings: Settings, agent) -> None:
    """Once the write is done, no object of the server holds the file's bytes: the chunks
    were written as execution parameters (SQLAlchemy's statement cache kept the first
    statement of each shape with the values in it: a customer's file in memory until
    the process ends)."""
    billing = await ticket_in(settings, "billing")
    prefix = f"keep no copy {hashlib.sha256(billing.encode()).hexdigest()}\n".encode()
    encoded = b64(prefix + b"a line of the exported log\n" * 48_000)  # 1.3 MB: two chunks
    async with Client(agent) as client:
        result = await client.call_tool(
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "Export attached.",
                "attachments": [{"name": "export.bin", "content_base64": encoded}],
            },
        )
        assert result.structured_content["attachments"][0]["size"] == len(prefix) + 1_296_000
        assert _held(prefix) == 0


async def _calls_then_held(settings: Settings, server_as, wait: float, **overrides: Any) -> int:
    """Three notes with the same 0.4 MB attachment, then, ``wait`` seconds later, one
    lookup: how many copies of the attachment's base64 the process still holds."""
    import asyncio

    billing = await ticket_in(settings, "billing")
    encoded = b64(f"keep no arguments {billing}\n".encode() + b"a line of the log\n" * 15_000)
    marker = encoded[:40]
    server = server_as(
        stdio_caller="agent",
        confirm_writes=[],
        attachment_max_bytes=2_000_000,
        attachment_ticket_max_bytes=3_000_000,
        database_timeout=1.0,
        **overrides,
    )
    async with Client(server) as client:
        for n in range(3):
            await client.call_tool(
                "add_internal_note",
                {
                    "ticket_id": billing,
                    "note": f"Log {n} attached.",
                    "attachments": [{"name": f"log{n}.txt", "content_base64": encoded}],
                },
            )
        del encoded
        await asyncio.sleep(wait)
        await client.call_tool("get_ticket_status_v2", {"ticket_id": billing})
        return _held(marker)


async def test_a_finished_call_keeps_none_of_its_arguments(
    settings: Settings, agent, server_as
) -> None:
    """Once a call has ended (and another one after it), the server holds nothing of its
    arguments. Each call's deadline timer used to keep the request's context, arguments
    included, for the whole tool timeout (30 s) after the call (``compat.deadline``); on
    PostgreSQL, asyncpg's statement cache for 300 s, and the socket of a connection the
    call opened for the connection's life (``compat.connect_apart``). Still kept, so the
    check waits that long: asyncpg's per-query timer, for the database timeout."""
    assert await _calls_then_held(settings, server_as, 1.2) == 0


@pytest.mark.sqlite_only  # the rate limiter's storage is the subject
async def test_a_redis_connection_keeps_none_of_the_call_that_opened_it(
    settings: Settings, agent, server_as, redis_url: str
) -> None:
    """With the rate limits in Redis, the limiter's connection (opened by the first call)
    keeps nothing of that call (``compat.redis_connections_apart``). Still kept, so the
    check waits that long: redis-py's read timer, for its 2 s socket timeout."""
    assert await _calls_then_held(settings, server_as, 2.2, rate_limit_storage_url=redis_url) == 0


def test_the_texts_set_aside_are_strings_without_bounds() -> None:
    """``set_aside`` lets FastMCP validate a placeholder in place of a long file text:
    that holds only while those fields are plain strings with no bound to check."""
    from ticket_server.tools.attachments import FileUpload, ResourceBody

    text = {"type": "string"}
    assert {
        k: v
        for k, v in FileUpload.model_json_schema()["properties"]["content_base64"].items()
        if k not in ("title", "description")
    } == text
    body = ResourceBody.model_json_schema()["properties"]
    for key in ("blob", "text"):
        assert body[key]["anyOf"] == [text, {"type": "null"}], body[key]


async def test_long_file_texts_arrive_whole_in_every_form(
    settings: Settings, agent, mode: str
) -> None:
    """Files whose text is longer than ``SET_ASIDE_CHARS`` (set aside from FastMCP's
    validation) arrive byte for byte as base64 and as an embedded blob; a long malformed
    one is refused; a client cannot name a placeholder."""
    from ticket_server.tools.attachments import SET_ASIDE_CHARS

    billing = await ticket_in(settings, "billing")
    rows = b"".join(b"%d,customer%d@example.com,ok\n" % (i, i) for i in range(4_000))
    assert len(b64(rows)) > SET_ASIDE_CHARS
    forms = [
        {"name": "a.csv", "content_base64": b64(rows)},
        {"type": "resource", "resource": {"uri": "file:///b.csv", "blob": b64(rows + b"b")}},
    ]
    async with Client(agent, mode=mode) as client:
        result = await client.call_tool(
            "add_internal_note", {"ticket_id": billing, "note": "n", "attachments": forms}
        )
        files = result.structured_content["attachments"]
        for f, data in zip(files, [rows, rows + b"b"], strict=True):
            assert (await read_resource(client, f"tickets://attachment/{f['id']}"))[0] == data
        before = await stored(settings)
        for bad, expected in (
            ("!" * (SET_ASIDE_CHARS + 4), "is not valid base64"),
            ("\x000123456789abcdef:0", "holds a NUL character"),  # a placeholder's form
        ):
            is_error, text = await call_any(
                client,
                "add_internal_note",
                {
                    "ticket_id": billing,
                    "note": "n",
                    "attachments": [{"name": "x", "content_base64": bad}],
                },
            )
            assert is_error and expected in text, text
        assert await stored(settings) == before


@pytest.mark.sqlite_only  # validation is the subject; asyncpg adds copies of its own
async def test_an_upload_is_not_copied_by_validation(settings: Settings, agent) -> None:
    """Python memory allocated during a 1.5 MB upload in memory (tracemalloc's peak less
    what was held before): the decoded file and its chunks, not the copies FastMCP's
    strict validation makes of the arguments (their JSON and the validated text, 2.7x
    the file on their own). 1.8x here; 3.15x with them."""
    import tracemalloc

    billing = await ticket_in(settings, "billing")
    data = b"a line of an exported log, kept as evidence\n" * 34_000
    encoded = b64(data)
    async with Client(agent) as client:
        await client.call_tool(
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "warm",
                "attachments": [{"name": "w.csv", "content_base64": b64(b"w,1\n")}],
            },
        )
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = await client.call_tool(
                "add_internal_note",
                {
                    "ticket_id": billing,
                    "note": "n",
                    "attachments": [{"name": "e.csv", "content_base64": encoded}],
                },
            )
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    assert not result.is_error
    assert peak < 2.5 * len(data), f"{peak / len(data):.2f}x the file"


@given(
    data=st.binary(max_size=200),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
@hypothesis_settings(max_examples=300, deadline=None)
def test_base64_of_chunks_is_the_base64_of_the_whole(data: bytes, cuts: list[int]) -> None:
    """Chunks of any sizes (a 1 MiB row is no multiple of 3) give the whole's base64, and
    a size the chunks do not hold, another digest or a part that is not bytes is a
    missing content."""
    from ticket_server.tickets.blobstore import BlobMissing, base64_of, verified

    bounds = [0, *sorted(c for c in cuts if c <= len(data)), len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    digest = hashlib.sha256(data).hexdigest()
    assert base64_of(verified(iter(chunks), digest, len(data))) == b64(data)
    other = hashlib.sha256(data + b"x").hexdigest()
    for sha, size, parts in (
        (digest, len(data) + 1, chunks),
        (other, len(data), chunks),
        (digest, len(data), [*chunks, ""]),
        (digest, len(data), [c.decode("latin-1") for c in chunks] or [""]),
    ):
        with pytest.raises(BlobMissing):
            base64_of(verified(iter(parts), sha, size))


async def _write_sql(settings: Settings, statements: list[tuple[str, dict[str, Any]]]) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as conn:
            for sql, params in statements:
                await conn.execute(text(sql), params)
    finally:
        await engine.dispose()


async def test_a_content_is_read_whatever_its_rows_and_refused_when_its_size_is_wrong(
    settings: Settings, agent
) -> None:
    """The database store reads a content's rows until the next is missing and checks
    the total against the recorded size, by both read paths: rows smaller than
    ``CHUNK_BYTES`` (an import) are read whole; a size the rows do not hold is a missing
    content, never a truncated file."""
    billing = await ticket_in(settings, "billing")
    data = b"%PDF-1.4\n" + bytes(range(256)) * 3584  # 896 KiB and 9 bytes, embedded
    async with Client(agent) as client:
        attachment = await note_with(client, billing, "a.pdf", data)
        sha, uri = hashlib.sha256(data).hexdigest(), f"tickets://attachment/{attachment['id']}"
        half = 512 * 1024
        await _write_sql(
            settings,
            [("DELETE FROM attachment_chunks WHERE sha256 = :s", {"s": sha})]
            + [
                (
                    "INSERT INTO attachment_chunks (sha256, seq, data) VALUES (:s, :q, :d)",
                    {"s": sha, "q": seq, "d": data[start : start + half]},
                )
                for seq, start in enumerate(range(0, len(data), half))
            ],
        )
        assert (await read_resource(client, uri))[0] == data
        read = await client.call_tool("get_attachment", {"attachment_id": attachment["id"]})
        assert base64.b64decode(read.content[1].resource.blob) == data
        for size in (half, len(data) + 1):  # the first row's end; one byte past the last
            await _write_sql(
                settings,
                [
                    (
                        "UPDATE attachments SET size = :n WHERE id = :i",
                        {"n": size, "i": attachment["id"]},
                    )
                ],
            )
            is_error, text = await call_any(
                client, "get_attachment", {"attachment_id": attachment["id"]}
            )
            assert is_error and "is not available" in text, text
            with pytest.raises(Exception, match="is not available"):
                await client.read_resource(uri)


async def _refused_both_ways(client: Client, attachment_id: int) -> None:
    """``get_attachment`` and the resource both refuse attachment ``attachment_id`` in the
    one sentence for a content the server cannot give, and send none of its bytes."""
    sentence = f"The content of attachment {attachment_id} is not available; tell an operator."
    result = await client.call_tool(
        "get_attachment", {"attachment_id": attachment_id}, raise_on_error=False
    )
    assert result.is_error and [c.text for c in result.content] == [sentence]
    with pytest.raises(Exception) as refused:
        await client.read_resource(f"tickets://attachment/{attachment_id}")
    assert sentence in str(refused.value)


def _unavailable_logged(caplog: pytest.LogCaptureFixture, attachment_id: int) -> int:
    return sum(
        r.levelname == "ERROR"
        and r.getMessage().startswith(f"attachment {attachment_id}: content not available")
        for r in caplog.records
    )


async def test_a_content_altered_in_the_store_is_refused_by_both_read_paths(
    settings: Settings, agent, caplog: pytest.LogCaptureFixture
) -> None:
    """Bytes changed in ``attachment_chunks`` behind the server's back, at the same size
    (a chunk zeroed), are read and hashed as they pass and refused at the end by both
    read paths, with an error logged: they were sent as the file, with its recorded
    SHA-256."""
    from ticket_server.tickets.attachment_models import CHUNK_BYTES

    billing = await ticket_in(settings, "billing")
    data = b"email,seats\n" + b"".join(b"u%d@example.com,%d\n" % (n, n % 7) for n in range(70_000))
    assert CHUNK_BYTES < len(data) < 2 * CHUNK_BYTES
    sha = hashlib.sha256(data).hexdigest()
    async with Client(agent) as client:
        attachment = await note_with(client, billing, "seats.csv", data)
        for seq in (0, 1):
            start = seq * CHUNK_BYTES
            part = data[start : start + CHUNK_BYTES]
            await _write_sql(
                settings,
                [
                    (
                        "UPDATE attachment_chunks SET data = :d WHERE sha256 = :s AND seq = :q",
                        {"d": bytes(len(part)), "s": sha, "q": seq},
                    )
                ],
            )
            caplog.clear()
            await _refused_both_ways(client, attachment["id"])
            assert _unavailable_logged(caplog, attachment["id"]) == 2
            await _write_sql(
                settings,
                [
                    (
                        "UPDATE attachment_chunks SET data = :d WHERE sha256 = :s AND seq = :q",
                        {"d": part, "s": sha, "q": seq},
                    )
                ],
            )
            assert (await read_resource(client, f"tickets://attachment/{attachment['id']}"))[
                0
            ] == data


@pytest.mark.sqlite_only  # a column of another type: PostgreSQL's bytea holds bytes only
async def test_a_stored_part_that_is_not_a_blob_is_refused(
    settings: Settings, agent, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk row whose value SQLite keeps as TEXT (a generic internal error when it was
    UTF-8, a database "unavailable" when not) is a content the server cannot give."""
    billing = await ticket_in(settings, "billing")
    text = b"line,of,an,export\n" * 70_000  # two chunks, UTF-8
    binary = b"%PDF-1.4\n" + bytes(range(256)) * 5000  # two chunks, not UTF-8
    async with Client(agent) as client:
        for name, data in (("export.csv", text), ("scan.pdf", binary)):
            attachment = await note_with(client, billing, name, data)
            await _write_sql(
                settings,
                [
                    (
                        "UPDATE attachment_chunks SET data = CAST(data AS TEXT) "
                        "WHERE sha256 = :s AND seq = 1",
                        {"s": hashlib.sha256(data).hexdigest()},
                    )
                ],
            )
            caplog.clear()
            if name == "export.csv":
                await _refused_both_ways(client, attachment["id"])
                assert _unavailable_logged(caplog, attachment["id"]) == 2
                continue
            # Over the embedding bound: get_attachment links it without a read, and the
            # resource the link names refuses it.
            read = await client.call_tool("get_attachment", {"attachment_id": attachment["id"]})
            assert read.structured_content["content"] == "link"
            with pytest.raises(Exception, match="is not available"):
                await client.read_resource(f"tickets://attachment/{attachment['id']}")
            assert _unavailable_logged(caplog, attachment["id"]) == 1


async def test_a_file_sent_as_a_link_is_not_read(settings: Settings, agent) -> None:
    """get_attachment answers a file over the embedding bound (neither image nor text) with
    a link without reading its bytes: with its stored chunks altered, the link still
    comes, and the resource the link names refuses the content. A long text file is sent
    as its first MAX_TEXT_CHARS characters, every byte still checked."""
    from ticket_server.tools.attachments import MAX_EMBED_BYTES, MAX_TEXT_CHARS

    billing = await ticket_in(settings, "billing")
    pdf = b"%PDF-1.4\n" + bytes(range(256)) * (MAX_EMBED_BYTES // 256 + 8)
    log = b"".join(b"line %06d: all is well\n" % n for n in range(6_000))
    assert len(log) > MAX_TEXT_CHARS
    async with Client(agent) as client:
        linked = await note_with(client, billing, "big.pdf", pdf)
        text = await note_with(client, billing, "app.log", log)
        read = await client.call_tool("get_attachment", {"attachment_id": text["id"]})
        body = json.loads(read.content[1].text)
        assert body["truncated"] is True and body["text"] == log[:MAX_TEXT_CHARS].decode()
        await _write_sql(
            settings,
            [
                (
                    "UPDATE attachment_chunks SET data = :d WHERE sha256 = :s AND seq = 0",
                    {"d": bytes(1024 * 1024), "s": hashlib.sha256(pdf).hexdigest()},
                )
            ],
        )
        read = await client.call_tool("get_attachment", {"attachment_id": linked["id"]})
        assert read.structured_content["content"] == "link", read.structured_content
        assert read.content[1].type == "resource_link"
        with pytest.raises(Exception, match="is not available"):
            await client.read_resource(f"tickets://attachment/{linked['id']}")


async def test_one_new_file_written_at_once_on_many_tickets_is_stored_once(
    settings: Settings, add_caller, server_as
) -> None:
    """Notes on 8 tickets sent at once, each with the same file not stored yet: each is
    written, the file's content stored once (C48's shape). On PostgreSQL writes to
    different tickets run side by side, and a review found one of them answered "The
    ticket database is unavailable" (both inserted the content's row; the second broke
    its key)."""
    import asyncio
    import os

    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    server = server_as(stdio_caller="agent", confirm_writes=[], write_rate_limit="1000/minute")
    rows = await _sql(
        settings,
        "SELECT id FROM tickets WHERE queue = 'billing' AND status IN ('open', 'in_progress') "
        "ORDER BY pk LIMIT 8",
    )
    ids = [r[0] for r in rows]
    before = await stored(settings)
    async with Client(server) as client:
        for _ in range(3):
            data = (f"log line {os.urandom(8).hex()}\n").encode() * 4000
            upload = [{"name": "log.txt", "content_base64": b64(data)}]
            results = await asyncio.gather(
                *(
                    call_any(
                        client,
                        "add_internal_note",
                        {"ticket_id": t, "note": "Same log.", "attachments": upload},
                    )
                    for t in ids
                )
            )
            assert [text for failed, text in results if failed] == []
    assert await stored(settings) == (before[0] + 24, before[1] + 3, before[2] + 3)


async def test_a_utf16_text_file_is_read_as_text(settings: Settings, agent) -> None:
    """A text file in UTF-16 (with its byte-order mark, either order) or in UTF-8 with a
    mark is sent as its text, not as UTF-8 read with replacement characters (a review's
    finding); a whole short file is not marked truncated."""
    import codecs

    billing = await ticket_in(settings, "billing")
    words = "Invoice 2041: the VAT line says 19 %, it should be 7 % (Köln)\n" * 3
    files = {
        "le.txt": codecs.BOM_UTF16_LE + words.encode("utf-16-le"),
        "be.txt": codecs.BOM_UTF16_BE + words.encode("utf-16-be"),
        "bom.txt": codecs.BOM_UTF8 + words.encode("utf-8"),
    }
    async with Client(agent) as client:
        for name, data in files.items():
            stored = await note_with(client, billing, name, data)
            assert stored["media_type"].startswith("text/"), (name, stored)
            read = await client.call_tool("get_attachment", {"attachment_id": stored["id"]})
            body = json.loads(read.content[1].text)
            assert body["text"] == words and body["truncated"] is False, (name, body)


async def test_bytes_that_are_not_utf8_are_not_taken_for_text(settings: Settings, agent) -> None:
    """A file whose bytes do not read as UTF-8 is not text, however short it is and
    wherever the bad bytes are: `\\xff` alone and `hello` with three bytes no UTF-8
    text holds were stored as text/plain, taken for a character cut at the end of the
    64 KiB read to tell the type (a review's finding). A long text whose 64 KiB cut
    falls inside a character is still text."""
    billing = await ticket_in(settings, "billing")
    long_text = ("é" * 40_000).encode()  # 80,000 bytes: the cut at 65,536 halves no "é"
    cut_inside = b"a" + long_text  # ...this one's does
    async with Client(agent) as client:
        for data in (b"\xff", b"\x80", b"hello\xff\xfe\xfd", b"hello\xe2\x82"):
            is_error, text = await call_any(
                client,
                "add_internal_note",
                {
                    "ticket_id": billing,
                    "note": "n",
                    "attachments": [{"name": "x.txt", "content_base64": b64(data)}],
                },
            )
            assert is_error and "application/octet-stream by its content" in text, (data, text)
        for data in (long_text, cut_inside):
            assert (await note_with(client, billing, "long.txt", data))["media_type"] == (
                "text/plain"
            )


async def test_a_text_nested_too_deep_for_json_is_plain_text(settings: Settings, agent) -> None:
    """A text file that opens like JSON but nests deeper than the JSON reader recurses
    (100,000 `[`) failed the write with "Error calling tool" (a RecursionError in the
    type detection, a review's finding): it is text, not JSON, and stored as such."""
    billing = await ticket_in(settings, "billing")
    async with Client(agent) as client:
        for data in (b"[" * 100_000, b"[" * 100_000 + b"]" * 100_000):
            stored = await note_with(client, billing, "deep.json", data)
            assert stored["media_type"] == "text/plain", stored


async def test_text_opening_like_a_short_signature_is_text(settings: Settings, agent) -> None:
    """A text file that happens to open with the two or three bytes of a binary format's
    signature ("BMW" and `BM` of a bitmap, an order id "MZ-2041" and `MZ` of a Windows
    program, a CSV whose first column is "ID3") was refused as that format ("is
    image/x-ms-bmp by its content, which is not accepted", a review's finding), and text
    opening with `{` was JSON by a one-byte guess: such a weak match counts only when the
    bytes do not read as text. A real bitmap is still one."""
    from PIL import Image

    billing = await ticket_in(settings, "billing")
    texts = {
        "bmw.txt": (b"BMW invoice 2041 shows the wrong VAT rate\n", "text/plain"),
        "order.txt": (b"MZ-2041: the order was charged twice\n", "text/plain"),
        "ids.csv": (b"ID3,name,amount\n1,a,2\n2,b,3\n", "text/csv"),
        "brace.txt": (b"{not JSON: a brace opens this note", "text/plain"),
    }
    bitmap = io.BytesIO()
    Image.new("RGB", (2, 2)).save(bitmap, "BMP")
    async with Client(agent) as client:
        for name, (data, media_type) in texts.items():
            assert (await note_with(client, billing, name, data))["media_type"] == media_type
        is_error, text = await call_any(
            client,
            "add_internal_note",
            {
                "ticket_id": billing,
                "note": "n",
                "attachments": [{"name": "a.txt", "content_base64": b64(bitmap.getvalue())}],
            },
        )
        assert is_error and "image/x-ms-bmp by its content" in text, text
