"""Guarantees of the write tools that a deliberate breakage showed no test held (issue 40):
the audit row commits with the write or neither does; an idempotency key belongs to its
caller; the server's own confirmation binding holds with the SDK's check out of the way.
Each test fails with its mutation in bench/mutations/mutations.toml."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from fastmcp import Client
from mcp.types import ElicitResult as WireElicitResult
from mcp.types import InputRequiredResult
from pydantic import SecretStr

from tests.access.conftest import add_caller, audit_rows, server_as  # noqa: F401  (fixtures)
from tests.helpers import text_of
from tests.tools.test_writes import AGENT_SCOPES, _sql, _yes, state, ticket_in
from ticket_server.settings import Settings

# A trigger that refuses the audit row a write adds in its own transaction (the one that
# carries `change`); the call pipeline's rows (no `change`) still go in.
REFUSE_WRITE_AUDIT = {
    "sqlite": [
        "CREATE TRIGGER refuse_write_audit BEFORE INSERT ON audit_events "
        "WHEN NEW.change IS NOT NULL BEGIN SELECT RAISE(ABORT, 'audit refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION refuse_write_audit() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'audit refused'; END $$",
        "CREATE TRIGGER refuse_write_audit BEFORE INSERT ON audit_events FOR EACH ROW "
        "WHEN (NEW.change IS NOT NULL) EXECUTE FUNCTION refuse_write_audit()",
    ],
}
DROP_WRITE_AUDIT_REFUSAL = {
    "sqlite": ["DROP TRIGGER refuse_write_audit"],
    "postgresql": ["DROP TRIGGER refuse_write_audit ON audit_events"],
}


async def _execute(settings: Settings, statements: list[str]) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def test_a_write_whose_audit_row_fails_writes_nothing_and_says_so(
    settings: Settings, add_caller: Any, server_as: Any, backend: str, mode: str
) -> None:
    """The audit row is written in the write's transaction: when the database refuses
    it, the note is not written either, the caller is told nothing was changed, and the
    retry (once the audit works again) writes the note exactly once."""
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    before = await state(settings, billing)
    arguments = {"ticket_id": billing, "note": "Audited or not at all", "idempotency_key": "a-1"}
    await _execute(settings, REFUSE_WRITE_AUDIT[backend])
    async with Client(server_as(stdio_caller="agent", confirm_writes=[]), mode=mode) as client:
        refused = await client.call_tool("add_internal_note", arguments, raise_on_error=False)
        assert refused.is_error and "nothing was changed" in text_of(refused), text_of(refused)
        assert await state(settings, billing) == before  # no comment, event, version, key
        await _execute(settings, DROP_WRITE_AUDIT_REFUSAL[backend])
        retried = await client.call_tool("add_internal_note", arguments)
        assert not (retried.meta or {}).get("dev.ticket-server/replay")
    notes = await _sql(
        settings,
        "SELECT count(*) FROM comments WHERE ticket_id = :t AND body = :b",
        t=billing,
        b=arguments["note"],
    )
    assert notes[0][0] == 1
    rows = await audit_rows(settings, tool="add_internal_note")
    assert [r.outcome for r in rows] == ["tool_error", "ok"]
    assert rows[0].change is None and json.loads(rows[1].change)["idempotency_key"] == "a-1"


async def test_one_idempotency_key_from_two_callers_is_two_writes(
    settings: Settings, add_caller: Any, server_as: Any, mode: str
) -> None:
    """An idempotency key is the caller's own: another caller sending the same key with
    the same arguments gets a write of its own, never the first caller's result as a
    replay; each caller's retry replays its own result."""
    for name in ("ana", "ben"):
        await add_caller(name, scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    arguments = {"ticket_id": billing, "note": "Same words", "idempotency_key": "shared-key"}
    results: dict[str, list[Any]] = {}
    for name in ("ana", "ben"):
        server = server_as(stdio_caller=name, confirm_writes=[])
        async with Client(server, mode=mode) as client:
            results[name] = [
                await client.call_tool("add_internal_note", arguments) for _ in range(2)
            ]
    for name, (first, again) in results.items():
        assert not (first.meta or {}).get("dev.ticket-server/replay"), name
        assert (again.meta or {}).get("dev.ticket-server/replay") is True, name
        assert again.structured_content == first.structured_content
    ana, ben = results["ana"][0].structured_content, results["ben"][0].structured_content
    assert ben["note_id"] != ana["note_id"]
    assert ben["ticket"]["version"] == ana["ticket"]["version"] + 1
    authors = await _sql(
        settings,
        "SELECT author FROM comments WHERE ticket_id = :t AND body = 'Same words' ORDER BY pk",
        t=billing,
    )
    assert [a[0] for a in authors] == ["ana", "ben"]


# --- the server's own confirmation binding, with the SDK's seal out of the way --------


def _envelope_codec(secret: str) -> Any:
    """The SDK's codec for the outer seal of 2026-07-28 request state, under the key the
    server derives from its secret (``access.sealing.Use.REQUEST_STATE``)."""
    from mcp.server.request_state import AESGCMRequestStateCodec

    from ticket_server.access.sealing import Use, subkey

    return AESGCMRequestStateCodec([subkey(secret, Use.REQUEST_STATE)])


def _resealed_for(codec: Any, wire_state: str, arguments: dict[str, Any]) -> str:
    """``wire_state`` (sealed by the SDK for one tools/call) sealed again for the same
    tool with ``arguments``: the SDK's own check then passes, and what is left to refuse
    other arguments is the server's binding inside it."""
    from mcp.server.request_state import compact_json

    envelope = json.loads(codec.unseal(wire_state))
    digest = hashlib.sha256(compact_json(arguments, sort_keys=True).encode()).digest()[:16]
    envelope["a"] = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return str(codec.seal(compact_json(envelope).encode()))


async def test_confirmation_binding_refuses_other_arguments_past_the_sdk_seal(
    settings: Settings, add_caller: Any, server_as: Any
) -> None:
    """2026-07-28: a person confirmed reply A. The request state, sealed again by the
    SDK's rules for reply B (so the SDK's binding of the arguments passes), is refused by
    the server's own binding (the hash of the arguments): B is not sent, nothing is
    changed, the refusal is audited. The same resealing for A itself is accepted, so
    this test fails (rather than passes unchecked) if the SDK's envelope changes."""
    secret = "binding test secret"
    await add_caller("agent", scopes=AGENT_SCOPES, queues=["billing"])
    billing = await ticket_in(settings, "billing")
    codec = _envelope_codec(secret)
    server = server_as(stdio_caller="agent", cursor_secret=SecretStr(secret))
    confirmed = {"confirm": WireElicitResult(action="accept", content={"confirm": True})}
    asked_for = {"ticket_id": billing, "reply": "Your refund of 10 EUR is on its way."}
    other = {"ticket_id": billing, "reply": "Your refund of 10,000 EUR is on its way."}

    async def call(arguments: dict[str, Any], request_state: str | None = None) -> Any:
        extra: dict[str, Any] = {}
        if request_state is not None:
            extra = {"request_state": request_state, "input_responses": confirmed}
        return await client.session.call_tool(
            "reply_to_customer", arguments, allow_input_required=True, **extra
        )

    async with Client(server, mode="2026-07-28", elicitation_handler=_yes) as client:
        first = await call(asked_for)
        assert isinstance(first, InputRequiredResult) and first.request_state is not None
        before = await state(settings, billing)
        swapped = await call(other, _resealed_for(codec, first.request_state, other))
        assert swapped.is_error, text_of(swapped)
        assert text_of(swapped).startswith("The confirmation does not match this request")
        assert "nothing was changed" in text_of(swapped)
        assert await state(settings, billing) == before
        same = await call(asked_for, _resealed_for(codec, first.request_state, asked_for))
        assert not same.is_error, text_of(same)
    bodies = await _sql(
        settings, "SELECT body FROM comments WHERE ticket_id = :t AND author = 'agent'", t=billing
    )
    assert [b[0] for b in bodies] == [asked_for["reply"]]
    rows = await audit_rows(settings, tool="reply_to_customer")
    assert [r.detail for r in rows] == [
        "confirmation requested (reply_to_customer)",
        "confirmation state invalid (reply_to_customer)",
        None,
    ]
