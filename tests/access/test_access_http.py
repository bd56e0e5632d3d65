"""Access over real HTTP: 401 + WWW-Authenticate and the RFC 9728 metadata, tokens only
in the header, revoked tokens, queue scoping, tool limits (C06), the HTTP request limit,
JWTs from an identity provider, and the audit trail of a real server process."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.access.conftest import scalar, support_and_billing_ids
from tests.helpers import text_of
from tests.transports.conftest import TICKET_SERVER, add_caller, server_env, start_http_server, stop
from ticket_server.access.ratelimit import META_KEY

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(server, token: str | None = None, url: str | None = None, **headers) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        url or server.url, json=INIT, headers={**HEADERS, **auth, **headers}, timeout=10
    )


def test_missing_bad_revoked_and_query_string_tokens_get_401(http_server, db_path: Path) -> None:
    revoked = add_caller(db_path, "old")
    _revoke(db_path, "old")
    metadata_url = f"{http_server.base}/.well-known/oauth-protected-resource/mcp"
    for response in (
        post(http_server),
        post(http_server, "tks_wrong"),
        post(http_server, revoked),
        post(http_server, url=f"{http_server.url}?access_token={http_server.token}"),
    ):
        assert response.status_code == 401
        assert f'resource_metadata="{metadata_url}"' in response.headers["www-authenticate"]
    assert post(http_server, http_server.token).status_code == 200
    metadata = httpx.get(metadata_url, timeout=5).json()
    assert metadata["resource"] == http_server.url
    assert metadata["bearer_methods_supported"] == ["header"]
    assert "tickets:read" in metadata["scopes_supported"]
    logs = http_server.logs()
    assert http_server.token not in logs and revoked not in logs


def test_a_token_that_cannot_be_checked_gets_503_not_401(db_path: Path, tmp_path: Path) -> None:
    """When the callers table does not answer, a valid token is neither refused as
    unknown (401 would tell the client to drop it) nor let in: 503 with Retry-After and
    a JSON-RPC error saying to retry; once the table answers, the same token works."""
    token = add_caller(db_path, "billing-bot")
    server = start_http_server(db_path, tmp_path)
    try:
        with sqlite3.connect(db_path) as conn:
            conn.execute("ALTER TABLE callers RENAME TO callers_away")
        try:
            response = post(server, token)
        finally:
            with sqlite3.connect(db_path) as conn:
                conn.execute("ALTER TABLE callers_away RENAME TO callers")
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "5"
        error = response.json()["error"]
        assert error["code"] == -32603 and "could not be checked" in error["message"]
        assert "Try again" in error["message"] and "callers_away" not in response.text
        assert post(server, token).status_code == 200
    finally:
        stop(server.process)
    assert token not in server.logs()


def _revoke(db_path: Path, name: str) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE callers SET revoked_at = '2026-11-30 00:00:00' WHERE name = ?", (name,)
        )


@pytest.mark.parametrize(
    ("mode", "engine"),
    [("legacy", "sqlite"), ("2026-07-28", "sqlite"), ("2026-07-28", "postgresql")],
)
async def test_billing_caller_over_http(
    db_path: Path, tmp_path: Path, mode: str, engine: str, request: pytest.FixtureRequest
) -> None:
    """The issue's "done when": a billing token sees only billing tickets, is refused
    with isError and a retry time after its limit, and each call is in the audit. Both
    revisions on SQLite; once more on PostgreSQL (a server process whose callers, queue
    scope and audit trail live in PostgreSQL), where the revision adds nothing new."""
    database = db_path if engine == "sqlite" else request.getfixturevalue("postgres_database_url")
    token = add_caller(database, "billing", queues=["billing"], tool_rate_limit="2/minute")
    noscope = add_caller(database, "noscope", scopes=("other:read",))
    support, billing = support_and_billing_ids(database)
    server = start_http_server(database, tmp_path)
    try:
        async with Client(server.transport(token), mode=mode) as client:
            ok = await client.call_tool("get_ticket_status_v2", {"ticket_id": billing})
            assert ok.is_error is False
            hidden = await client.call_tool("get_ticket_status_v2", {"ticket_id": support})
            assert hidden.is_error and f"No ticket with id {support!r}" in text_of(hidden)
            page = await client.call_tool("search_tickets_v2", {"limit": 50})
            assert {t["queue"] for t in page.structured_content["tickets"]} == {"billing"}
            refused = await client.call_tool("get_ticket_status_v2", {"ticket_id": billing})
            assert refused.is_error and "Rate limit reached" in text_of(refused)
            assert 1 <= refused.meta[META_KEY]["retry_after_seconds"] <= 60
        if mode == "legacy":  # a caller whose scopes allow no tool gets no session (16.3)
            noscope_init = httpx.post(
                server.url,
                json=INIT,
                headers={**HEADERS, "Authorization": f"Bearer {noscope}"},
                timeout=10,
            )
            assert noscope_init.status_code == 403 and "mcp-session-id" not in noscope_init.headers
        else:
            async with Client(server.transport(noscope), mode=mode) as client:
                assert (await client.list_tools()).tools == []
                with pytest.raises(MCPError) as denied:
                    await client.call_tool("search_tickets_v2", {"query": "x"})
                assert denied.value.error.code == -32602
                assert denied.value.error.message == "Unknown tool: 'search_tickets_v2'"
    finally:
        stop(server.process)  # SIGTERM: the audit trail is flushed
    rows = scalar(
        database,
        "SELECT string_agg(caller || ' ' || tool || ' ' || outcome || ' ' || transport, ',' "
        "ORDER BY pk) FROM audit_events"
        if engine == "postgresql"
        else "SELECT group_concat(caller || ' ' || tool || ' ' || outcome || ' ' || transport, ',') "
        "FROM (SELECT * FROM audit_events ORDER BY pk)",
    )
    # A caller with no usable scope is refused its legacy session (403): no call reaches
    # the server; over 2026-07-28 the call does, and is refused as an unknown tool.
    assert rows.split(",") == [
        "billing get_ticket_status_v2 ok http",
        "billing get_ticket_status_v2 tool_error http",
        "billing search_tickets_v2 ok http",
        "billing get_ticket_status_v2 rate_limited http",
        *(["noscope search_tickets_v2 denied http"] if mode == "2026-07-28" else []),
    ]
    audit = _cli(database, "audit", "--caller", "billing", "--json")
    assert [json.loads(line)["outcome"] for line in audit.splitlines()] == [
        "ok",
        "tool_error",
        "ok",
        "rate_limited",
    ]
    assert token not in server.logs() and token not in audit


def _cli(db_path: Path | str, *args: str) -> str:
    import subprocess

    done = subprocess.run(
        [*TICKET_SERVER, *args], env=server_env(db_path), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


async def test_c06_one_callers_limit_does_not_touch_another(db_path: Path, tmp_path: Path) -> None:
    """C06: caller A calls search_tickets_v2 until rate-limited; caller B then calls it once:
    B's call succeeds; A's refusal is an isError result that says when to retry."""
    a = add_caller(db_path, "caller-a", tool_rate_limit="5/minute")
    b = add_caller(db_path, "caller-b", tool_rate_limit="5/minute")
    server = start_http_server(db_path, tmp_path)
    try:
        async with Client(server.transport(a)) as client_a, Client(server.transport(b)) as client_b:
            for _ in range(5):
                assert (
                    await client_a.call_tool("search_tickets_v2", {"query": "invoice"})
                ).is_error is False
            refused = await client_a.call_tool("search_tickets_v2", {"query": "invoice"})
            assert refused.is_error and "retry in" in text_of(refused)
            assert refused.meta[META_KEY]["retry_after_seconds"] >= 1
            assert (
                await client_b.call_tool("search_tickets_v2", {"query": "invoice"})
            ).is_error is False
    finally:
        stop(server.process)


def test_http_request_limit_answers_429_per_caller(db_path: Path, tmp_path: Path) -> None:
    a = add_caller(db_path, "flooder", http_rate_limit="3/minute")
    b = add_caller(db_path, "calm")
    server = start_http_server(db_path, tmp_path)
    try:
        statuses = [post(server, a).status_code for _ in range(3)]
        assert statuses == [200, 200, 200]
        limited = post(server, a)
        assert limited.status_code == 429
        assert int(limited.headers["Retry-After"]) >= 1
        assert limited.headers["X-RateLimit-Limit"] == "3"
        assert limited.headers["X-RateLimit-Remaining"] == "0"
        assert "X-RateLimit-Reset" in limited.headers
        assert post(server, b).status_code == 200
        assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200
    finally:
        stop(server.process)


def test_jwt_mode_with_a_generated_key_pair(db_path: Path, tmp_path: Path) -> None:
    from fastmcp.server.auth.providers.jwt import RSAKeyPair

    keys = RSAKeyPair.generate()
    add_caller(db_path, "billing-bot", queues=["billing"])
    add_caller(db_path, "revoked-bot")
    _revoke(db_path, "revoked-bot")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_AUTH_MODE="jwt",
        TICKET_SERVER_JWT_ISSUER="https://idp.example",
        TICKET_SERVER_JWT_AUDIENCE="ticket-server",
        TICKET_SERVER_JWT_PUBLIC_KEY=keys.public_key,
        TICKET_SERVER_JWT_CALLER_CLAIM="azp",
    )
    try:

        def token(**claims) -> str:
            base = {
                "subject": "u-1",
                "issuer": "https://idp.example",
                "audience": "ticket-server",
                "scopes": ["tickets:read"],
                "additional_claims": {"azp": "billing-bot"},
            }
            return keys.create_token(**{**base, **claims})

        support, billing = support_and_billing_ids(db_path)

        async def call(tok: str, ticket: str):
            async with Client(server.transport(tok)) as client:
                return await client.call_tool("get_ticket_status_v2", {"ticket_id": ticket})

        assert asyncio.run(call(token(), billing)).is_error is False
        assert asyncio.run(call(token(), support)).is_error is True  # queues from the callers table
        assert post(server, token(audience="someone-else")).status_code == 401
        assert post(server, token(issuer="https://evil.example")).status_code == 401
        assert post(server, token(additional_claims={"azp": "revoked-bot"})).status_code == 401
        assert post(server, token(additional_claims={})).status_code == 401  # no caller claim
        other = RSAKeyPair.generate()
        assert (
            post(
                server,
                other.create_token(
                    subject="x", issuer="https://idp.example", audience="ticket-server"
                ),
            ).status_code
            == 401
        )
        noscope = asyncio.run(_names(server, token(scopes=["other:read"])))
        assert noscope == set()
        metadata = httpx.get(
            f"{server.base}/.well-known/oauth-protected-resource/mcp", timeout=5
        ).json()
        assert metadata["authorization_servers"] == ["https://idp.example"]
    finally:
        stop(server.process)


async def _names(server, token: str) -> set[str]:
    async with Client(server.transport(token)) as client:
        return {t.name for t in (await client.list_tools()).tools}
