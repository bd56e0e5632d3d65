"""Issue 16, item 8: search cursors are signed with a random secret per installation
(kept beside the data), not a key anyone can derive from the database URL."""

from __future__ import annotations

import base64
import hashlib
import hmac
import stat

import pytest
from fastmcp import Client
from pydantic import SecretStr

from tests.helpers import text_of
from ticket_server.server import build_runtime, build_server, cursor_secret
from ticket_server.tools.cursor import cursor_key


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))


def _resign(cursor: str, key: bytes) -> str:
    body_text = cursor.split(".")[0]
    body = base64.urlsafe_b64decode(body_text + "=" * (-len(body_text) % 4))
    tag = hmac.new(key, body, hashlib.sha256).digest()[:16]
    return f"{body_text}.{base64.urlsafe_b64encode(tag).rstrip(b'=').decode()}"


async def _pages(settings, cursor: str | None = None):
    async with Client(build_server(settings)) as client:
        args = {"query": "", "limit": 2} | ({"cursor": cursor} if cursor else {})
        return await client.call_tool("search_tickets_v2", args, raise_on_error=False)


async def test_a_cursor_signed_with_the_url_derived_key_is_refused(settings) -> None:
    first = await _pages(settings)
    cursor = first.structured_content["next_cursor"]
    assert (await _pages(settings, cursor)).is_error is False  # another server, same installation
    forged = _resign(cursor, cursor_key(settings.database_url))
    refused = await _pages(settings, forged)
    assert refused.is_error and "cursor is not valid" in text_of(refused)


async def test_the_installation_secret_is_random_private_and_kept(settings, tmp_path) -> None:
    secret, note = cursor_secret(settings)
    assert len(secret) >= 40 and secret not in settings.database_url
    assert cursor_secret(settings) == (secret, note)  # the same on every start
    path = note.split(" in ", 1)[1].split(";")[0]
    assert stat.S_IMODE(__import__("os").stat(path).st_mode) == 0o600
    if settings.sqlite_path is not None:
        assert path == f"{settings.sqlite_path}.cursor-secret"
    else:
        assert "TICKET_SERVER_CURSOR_SECRET" in note  # replicas must share one: said at start
    configured = settings.model_copy(update={"cursor_secret": SecretStr("shared by the replicas")})
    assert cursor_secret(configured) == ("shared by the replicas", None)
    assert build_runtime(configured).cursor_key == cursor_key("shared by the replicas")
