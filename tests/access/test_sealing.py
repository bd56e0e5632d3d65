"""Issue 30, item 5: one secret, one key per use (``ticket_server/access/sealing.py``);
``TICKET_SERVER_CURSOR_SECRET`` still works as the older name of ``TICKET_SERVER_SECRET``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastmcp import Client
from mcp.server.request_state import InvalidRequestState
from pydantic import SecretStr

from tests.helpers import text_of
from ticket_server.access.sealing import (
    Keys,
    RequestStateSeal,
    SignedClaims,
    Use,
    server_secret,
    subkey,
)
from ticket_server.server import build_server
from ticket_server.settings import SettingsInvalid, load_settings
from ticket_server.tickets.search import Position
from ticket_server.tools.cursor import CursorCodec, CursorError


def test_a_value_sealed_for_one_use_opens_as_no_other() -> None:
    keys = Keys(lambda: "one secret")
    assert len({keys(use) for use in Use}) == len(Use)  # a key per use
    assert all(len(keys(use)) == 32 for use in Use)
    position = Position(updated_at=datetime(2026, 1, 2, tzinfo=UTC), pk=7, rank=3)

    cursor = CursorCodec(keys.of(Use.CURSOR)).encode(position, "search")
    assert CursorCodec(keys.of(Use.CURSOR)).decode(cursor, "search") == position
    for other in (Use.CONFIRMATION, Use.REQUEST_STATE):
        with pytest.raises(CursorError):
            CursorCodec(keys.of(other)).decode(cursor, "search")

    claims = SignedClaims(keys.of(Use.CONFIRMATION)).seal({"c": "agent"})
    assert SignedClaims(keys.of(Use.CONFIRMATION)).unseal(claims) == {"c": "agent"}
    for other in (Use.CURSOR, Use.REQUEST_STATE):
        assert SignedClaims(keys.of(other)).unseal(claims) is None

    state = RequestStateSeal(keys).seal(b"payload")
    assert RequestStateSeal(Keys(lambda: "one secret")).unseal(state) == b"payload"
    with pytest.raises(InvalidRequestState):
        RequestStateSeal(Keys(lambda: "another secret")).unseal(state)
    # The request-state key under the SDK's own codec opens it; the cursor key does not.
    from mcp.server.request_state import AESGCMRequestStateCodec

    assert AESGCMRequestStateCodec([keys(Use.REQUEST_STATE)]).unseal(state) == b"payload"
    with pytest.raises(InvalidRequestState):
        AESGCMRequestStateCodec([keys(Use.CURSOR)]).unseal(state)


def test_the_older_setting_name_is_an_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKET_SERVER_CURSOR_SECRET", "kept from before")
    older = load_settings()
    assert server_secret(older)[0]() == "kept from before"
    monkeypatch.setenv("TICKET_SERVER_SECRET", "kept from before")  # both, equal: fine
    assert server_secret(load_settings())[0]() == "kept from before"
    monkeypatch.setenv("TICKET_SERVER_SECRET", "a new one")
    with pytest.raises(SettingsInvalid) as refused:
        load_settings()
    (line,) = refused.value.lines
    assert "TICKET_SERVER_SECRET" in line and "TICKET_SERVER_CURSOR_SECRET" in line
    assert "a new one" not in line and "kept from before" not in line  # no secret echoed
    monkeypatch.delenv("TICKET_SERVER_CURSOR_SECRET")
    assert server_secret(load_settings())[0]() == "a new one"
    assert subkey("a new one", Use.CURSOR) != subkey("kept from before", Use.CURSOR)


async def test_a_cursor_made_under_the_older_name_pages_under_the_new(settings) -> None:
    """Two servers (replicas), one configured with the older name and one with the new,
    the same value: a cursor of one pages on the other; another value refuses it."""

    async def page(update: dict[str, SecretStr], cursor: str | None = None):
        async with Client(build_server(settings.model_copy(update=update))) as client:
            args = {"query": "", "limit": 2} | ({"cursor": cursor} if cursor else {})
            return await client.call_tool("search_tickets_v2", args, raise_on_error=False)

    first = await page({"cursor_secret": SecretStr("shared")})
    cursor = first.structured_content["next_cursor"]
    assert cursor
    assert (await page({"secret": SecretStr("shared")}, cursor)).is_error is False
    refused = await page({"secret": SecretStr("not shared")}, cursor)
    assert refused.is_error and "cursor is not valid" in text_of(refused)
