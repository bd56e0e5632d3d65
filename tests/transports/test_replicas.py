"""Several stateless replicas on one PostgreSQL and one Redis (issue 6; case C08)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx2 as httpx
from mcp import Client

from tests.helpers import create_caller, text_of
from tests.postgres import PostgresServer
from tests.services import redis_server, redis_url  # noqa: F401  (fixtures)
from tests.transports.conftest import start_http_server, stop

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "lb", "version": "1"},
    },
}


def post(base: str, token: str, body: dict, protocol: str = "2025-11-25") -> httpx.Response:
    return httpx.post(
        f"{base}/mcp",
        json=body,
        timeout=30,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": protocol,
        },
    )


async def test_c08_two_replicas_on_postgres_and_redis(
    postgres: PostgresServer, postgres_template: str, redis_url: str, tmp_path: Path
) -> None:
    """C08: two server processes on two loopback ports share one PostgreSQL and one Redis;
    a client sending its requests alternately to each sees no error (pages of one search
    included), a caller's rate limit holds across both, and a legacy session that a load
    balancer spreads over both replicas works (stateless_http)."""
    name = f"replicas_{os.getpid()}"
    postgres.psql(f"CREATE DATABASE {name} TEMPLATE {postgres_template}")
    url = postgres.url(name)
    token = await create_caller(url, "billing-bot", tool_rate_limit="8/minute")
    env = {
        "TICKET_SERVER_DATABASE_URL": url,
        "TICKET_SERVER_RATE_LIMIT_STORAGE_URL": redis_url,
        "TICKET_SERVER_STATELESS_HTTP": "true",
    }
    replicas = [start_http_server(tmp_path / "unused.db", tmp_path, **env) for _ in range(2)]
    try:
        clients = [Client(r.transport(token), mode="2026-07-28") for r in replicas]
        async with clients[0] as a, clients[1] as b:
            for i in range(4):
                result = await (a, b)[i % 2].call_tool(
                    "get_ticket_status_v2", {"ticket_id": "SUP-4412"}
                )
                assert (
                    result.is_error is False
                    and result.structured_content["status"] == "waiting_on_customer"
                )
            first = await a.call_tool("search_tickets_v2", {"query": "refund", "limit": 5})
            second = await b.call_tool(
                "search_tickets_v2",
                {"query": "refund", "limit": 5, "cursor": first.structured_content["next_cursor"]},
            )
            assert second.is_error is False, text_of(second)
            ids = [
                t["id"]
                for t in first.structured_content["tickets"] + second.structured_content["tickets"]
            ]
            assert len(set(ids)) == 10, "a cursor made by one replica pages on the other"
            # 6 calls so far, 2 of them searches: get_ticket_status_v2 has 4 of its 8.
            for i in range(4):
                ok = await (a, b)[i % 2].call_tool(
                    "get_ticket_status_v2", {"ticket_id": "SUP-4412"}
                )
                assert ok.is_error is False
            refused = await a.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            assert refused.is_error and "retry" in text_of(refused).lower()
            refused = await b.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            assert refused.is_error, "the limit is shared through Redis, not per replica"

        # A legacy client whose requests a load balancer sends to either replica.
        one, two = (r.base for r in replicas)
        init = await asyncio.to_thread(post, one, token, INIT)
        assert init.status_code == 200, init.text
        note = await asyncio.to_thread(
            post, two, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert note.status_code in (200, 202)
        listed = await asyncio.to_thread(
            post, two, token, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        )
        assert listed.status_code == 200, listed.text
        assert "search_tickets_v2" in listed.text
    finally:
        for r in replicas:
            stop(r.process)
        postgres.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
