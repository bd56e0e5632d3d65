"""Callers, authorization, queue scoping, rate limits and audit through the in-memory
client, which is served like stdio: the caller is the one the settings name."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import pytest
from fastmcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import Field, SecretStr

from tests.access.conftest import audit_rows, revoke, scalar, support_and_billing_ids
from tests.helpers import text_of
from ticket_server.access.ratelimit import META_KEY

ALL_TOOLS = {"get_ticket_status", "search_tickets", "get_ticket_status_v2", "search_tickets_v2"}


async def names(client: Client) -> set[str]:
    return {t.name for t in await client.list_tools()}


async def test_builtin_local_caller_reads_every_queue(server_as, settings, mode: str) -> None:
    support, billing = support_and_billing_ids(settings.database_url)
    async with Client(server_as(), mode=mode) as client:
        assert await names(client) >= ALL_TOOLS
        for ticket in (support, billing):
            result = await client.call_tool("get_ticket_status_v2", {"ticket_id": ticket})
            assert result.is_error is False


async def test_queue_limited_caller_sees_only_its_queue(
    server_as, add_caller, settings, mode: str
) -> None:
    """A caller limited to billing: a support ticket is "no ticket" exactly as a missing
    one, by id (v1, v2) and by search (v1, v2 with every page). Both engines: the scope
    is a condition in each engine's own queries (FTS5 / tsvector, LIKE / pg_trgm)."""
    await add_caller("billing", queues=["billing"])
    support, billing = support_and_billing_ids(settings.database_url)
    async with Client(server_as(stdio_caller="billing"), mode=mode) as client:
        assert (
            await client.call_tool("get_ticket_status_v2", {"ticket_id": billing})
        ).is_error is False
        for tool in ("get_ticket_status", "get_ticket_status_v2"):
            hidden = await client.call_tool(tool, {"ticket_id": support}, raise_on_error=False)
            missing = await client.call_tool(
                tool, {"ticket_id": "SUP-0000000"}, raise_on_error=False
            )
            assert hidden.is_error and missing.is_error
            assert text_of(hidden) == text_of(missing).replace("SUP-0000000", support)
        v1 = await client.call_tool("search_tickets", {"query": "a", "limit": 50})
        assert v1.structured_content["result"]
        queues_v1 = {await _queue(client, t["id"]) for t in v1.structured_content["result"]}
        assert queues_v1 == {"billing"}
        seen, cursor = [], None
        while True:
            args = {"query": "", "limit": 50} | ({"cursor": cursor} if cursor else {})
            page = (await client.call_tool("search_tickets_v2", args)).structured_content
            seen += page["tickets"]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert seen and {t["queue"] for t in seen} == {"billing"}
        # Another queue's name is answered as an unknown queue (C19), listing only billing.
        explicit = await client.call_tool(
            "search_tickets_v2", {"queue": "support"}, raise_on_error=False
        )
        unknown = await client.call_tool(
            "search_tickets_v2", {"queue": "no-such-queue"}, raise_on_error=False
        )
        assert explicit.is_error and unknown.is_error
        assert text_of(explicit) == text_of(unknown).replace("no-such-queue", "support")
        assert "billing" in text_of(explicit)
    # the whole billing queue, nothing else
    assert len(seen) == int(
        scalar(settings.database_url, "SELECT count(*) FROM tickets WHERE queue = 'billing'")
    )


async def _queue(client: Client, ticket_id: str) -> str:
    return (
        await client.call_tool("get_ticket_status_v2", {"ticket_id": ticket_id})
    ).structured_content["queue"]


async def test_caller_without_the_scope_sees_no_tool_and_calls_none(
    server_as, add_caller, mode: str
) -> None:
    await add_caller("writer", scopes=("tickets:admin",))  # a scope no tool needs
    async with Client(server_as(stdio_caller="writer"), mode=mode) as client:
        assert await names(client) == set()
        with pytest.raises(MCPError) as denied:
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {"ticket_id": "SUP-4412"})
        assert denied.value.error.code == unknown.value.error.code == -32602
        assert denied.value.error.message == unknown.value.error.message.replace(
            "no_such_tool", "get_ticket_status"
        )


@pytest.mark.parametrize(
    "case", ["bad token", "revoked token", "unknown stdio caller", "revoked stdio caller"]
)
async def test_no_valid_identity_gets_nothing(server_as, add_caller, settings, case: str) -> None:
    token = await add_caller("gone")
    overrides = {
        "bad token": {"token": SecretStr("tks_not-a-token")},
        "revoked token": {"token": SecretStr(token)},
        "unknown stdio caller": {"stdio_caller": "nobody"},
        "revoked stdio caller": {"stdio_caller": "gone"},
    }[case]
    if "revoked" in case:
        await revoke(settings, "gone")
    async with Client(server_as(**overrides)) as client:
        assert await names(client) == set()
        with pytest.raises(MCPError) as refused:
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert (
            refused.value.error.code == -32602
            and refused.value.error.message == "Unknown tool: 'get_ticket_status'"
        )


async def test_token_names_the_caller(server_as, add_caller, settings) -> None:
    token = await add_caller("billing", queues=["billing"])
    support, _ = support_and_billing_ids(settings.database_url)
    async with Client(server_as(token=SecretStr(token))) as client:
        result = await client.call_tool(
            "get_ticket_status_v2", {"ticket_id": support}, raise_on_error=False
        )
        assert result.is_error and support in text_of(result)


async def test_revocation_applies_to_the_next_call(server_as, add_caller, settings) -> None:
    """Authorization is checked on every call, not once per connection."""
    await add_caller("temp")
    async with Client(server_as(stdio_caller="temp")) as client:
        assert (
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        ).is_error is False
        await revoke(settings, "temp")
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert await names(client) == set()


async def test_revocation_by_another_process_applies_within_the_cache_window(
    server_as, add_caller, settings, db_path: Path
) -> None:
    """The CLI revokes from another process (no in-process invalidation): the caller
    cache lets it take effect within TICKET_SERVER_CALLER_CACHE_SECONDS."""
    import subprocess

    from tests.transports.conftest import TICKET_SERVER, server_env

    await add_caller("elsewhere")
    async with Client(server_as(stdio_caller="elsewhere", caller_cache_seconds=1.0)) as client:
        args = {"ticket_id": "SUP-4412"}
        assert (await client.call_tool("get_ticket_status_v2", args)).is_error is False
        done = await asyncio.to_thread(
            subprocess.run,
            [*TICKET_SERVER, "callers", "revoke", "elsewhere"],
            env=server_env(db_path),
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30  # a generous bound, never a timing assertion
        refused: MCPError | None = None
        while refused is None and loop.time() < deadline:
            try:
                await client.call_tool("get_ticket_status_v2", args)
            except MCPError as exc:
                refused = exc
            else:
                await asyncio.sleep(0.1)
        assert (
            refused is not None
            and refused.error.code == -32602
            and "Unknown tool" in refused.error.message
        )


async def test_caller_cache_spares_the_registry_and_0_disables_it(add_caller, settings) -> None:
    from ticket_server.access.callers import open_store

    await add_caller("cached")
    for seconds, lookups in ((60.0, 1), (0.0, 3)):
        store = open_store(settings.model_copy(update={"caller_cache_seconds": seconds}))
        queries = 0
        real = store.session

        def counting():  # type: ignore[no-untyped-def]
            nonlocal queries
            queries += 1
            return real()  # noqa: B023  (called inside this iteration)

        store.session = counting  # type: ignore[method-assign]
        try:
            for _ in range(3):
                assert (await store.by_name("cached")).name == "cached"
        finally:
            await store.aclose()
        assert queries == lookups, seconds


async def test_rate_limit_refuses_then_recovers(server_as, add_caller, mode: str) -> None:
    await add_caller("slow", tool_rate_limit="2/2 second")
    async with Client(server_as(stdio_caller="slow"), mode=mode) as client:
        args = {"ticket_id": "SUP-4412"}
        for _ in range(2):
            assert (await client.call_tool("get_ticket_status", args)).is_error is False
        # tools/list is never counted
        for _ in range(5):
            await client.list_tools()
        refused = await client.call_tool("get_ticket_status", args, raise_on_error=False)
        assert refused.is_error is True
        text = text_of(refused)
        assert "Rate limit reached for get_ticket_status" in text and "retry in" in text
        retry = refused.meta[META_KEY]["retry_after_seconds"]
        assert isinstance(retry, int) and 1 <= retry <= 2
        assert refused.meta[META_KEY]["limit"] == "2 per 2 second"
        # another tool has its own counter
        assert (await client.call_tool("search_tickets", {"query": "a"})).is_error is False
        await asyncio.sleep(retry + 0.2)
        assert (await client.call_tool("get_ticket_status", args)).is_error is False


async def test_default_limit_comes_from_settings(server_as) -> None:
    async with Client(server_as(tool_rate_limit="1/minute")) as client:
        assert (
            await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        ).is_error is False
        refused = await client.call_tool(
            "get_ticket_status", {"ticket_id": "SUP-4412"}, raise_on_error=False
        )
        assert refused.is_error and "1 call per minute" in text_of(refused)
        assert 1 <= refused.meta[META_KEY]["retry_after_seconds"] <= 60


async def test_audit_rows_for_each_outcome(server_as, add_caller, settings, mode: str) -> None:
    await add_caller("auditee", tool_rate_limit="1/minute", queues=["billing"])
    await add_caller("noscope", scopes=("other:read",))
    async with Client(server_as(stdio_caller="auditee"), mode=mode) as client:
        await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})  # ok
        await client.call_tool(
            "get_ticket_status", {"ticket_id": "SUP-4412"}, raise_on_error=False
        )  # rate limited
        # tool error (get_ticket_status_v2 would be rate limited: it shares get_ticket_status's count)
        await client.call_tool("search_tickets_v2", {"limit": 0}, raise_on_error=False)
    async with Client(server_as(stdio_caller="noscope"), mode=mode) as client:
        with pytest.raises(MCPError):  # denied: answered as an unknown tool (-32602)
            await client.call_tool("search_tickets", {"query": "x"})
    # the lifespan ended with each client: everything is flushed
    rows = await audit_rows(settings)
    got = [(r.caller, r.tool, r.outcome) for r in rows]
    assert got == [
        ("auditee", "get_ticket_status", "ok"),
        ("auditee", "get_ticket_status", "rate_limited"),
        ("auditee", "search_tickets_v2", "tool_error"),
        ("noscope", "search_tickets", "denied"),
    ]
    for row in rows:
        assert len(row.trace_id) == 32 and row.transport in ("memory", "stdio")
        assert row.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert row.result_bytes > 0 and row.duration_ms >= 0
    assert rows[0].arguments == '{"ticket_id": "SUP-4412"}'
    assert "retry in" in (rows[1].detail or "")
    assert len({r.trace_id for r in rows}) == 4
    assert [r.caller for r in await audit_rows(settings, caller="noscope")] == ["noscope"]


async def test_sensitive_arguments_are_redacted(server_as, settings, capfd) -> None:
    server = server_as()

    @server.tool(tags={"tickets:read"})
    async def login_probe(
        user: str, password: Annotated[str, Field(json_schema_extra={"x-sensitive": True})]
    ) -> str:
        return "ok"

    async with Client(server) as client:
        await client.call_tool("login_probe", {"user": "ann", "password": "hunter2-secret"})
    rows = await audit_rows(settings, tool="login_probe")
    assert rows[0].arguments == '{"password": "[redacted]", "user": "ann"}'
    assert "hunter2-secret" not in capfd.readouterr().err
