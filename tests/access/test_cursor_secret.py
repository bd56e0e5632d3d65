"""Issue 16, item 8: search cursors are signed with a random secret per installation
(kept beside the data), not a key anyone can derive from the database URL."""

from __future__ import annotations

import os
import stat

import pytest
from fastmcp import Client
from pydantic import SecretStr

from tests.helpers import text_of
from ticket_server.access.sealing import Use, server_secret, subkey
from ticket_server.server import build_runtime, build_server
from ticket_server.settings import default_data_dir


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))


async def _pages(settings, cursor: str | None = None):
    async with Client(build_server(settings)) as client:
        args = {"query": "", "limit": 2} | ({"cursor": cursor} if cursor else {})
        return await client.call_tool("search_tickets_v2", args, raise_on_error=False)


async def test_a_cursor_signed_with_the_url_derived_key_is_refused(settings) -> None:
    first = await _pages(settings)
    cursor = first.structured_content["next_cursor"]
    assert (await _pages(settings, cursor)).is_error is False  # another server, same installation
    # A real cursor of the same search, made with the key the URL used to give.
    forged = (
        await _pages(
            settings.model_copy(update={"cursor_secret": SecretStr(settings.database_url)})
        )
    ).structured_content["next_cursor"]
    assert forged != cursor
    refused = await _pages(settings, forged)
    assert refused.is_error and "cursor is not valid" in text_of(refused)


async def test_the_installation_secret_is_random_private_and_kept(settings) -> None:
    secret, warning = server_secret(settings)
    path = (
        f"{settings.sqlite_path}.cursor-secret"
        if settings.sqlite_path is not None
        else str(default_data_dir() / "cursor.cursor-secret")
    )
    assert not os.path.exists(path)  # nothing is made before the first cursor
    made = secret()
    assert len(made) >= 40 and made not in settings.database_url
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert server_secret(settings)[0]() == made  # the same on every start
    if settings.sqlite_path is None:
        assert warning is not None and "TICKET_SERVER_SECRET" in warning  # said at start
    else:
        assert warning is None
    configured = settings.model_copy(update={"cursor_secret": SecretStr("shared by the replicas")})
    assert server_secret(configured)[0]() == "shared by the replicas"
    assert build_runtime(configured).cursor_key() == subkey("shared by the replicas", Use.CURSOR)
