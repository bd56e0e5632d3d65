"""Rate limits shared by two server processes through a real redis-server."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from tests.helpers import text_of
from tests.services import redis_server, redis_url  # noqa: F401  (fixtures)
from tests.transports.conftest import add_caller, start_http_server, stop


async def test_two_processes_share_the_limits_through_redis(db_path: Path, tmp_path: Path, redis_url: str) -> None:
    token = add_caller(db_path, "shared", tool_rate_limit="3/minute", http_rate_limit="6/minute")
    env = {"TICKET_SERVER_RATE_LIMIT_STORAGE_URL": redis_url, "TICKET_SERVER_STATELESS_HTTP": "true"}
    one = start_http_server(db_path, tmp_path, **env)
    two = start_http_server(db_path, tmp_path, **env)
    try:
        args = {"ticket_id": "SUP-4412"}
        async with Client(one.transport(token), mode="2026-07-28") as a, Client(two.transport(token), mode="2026-07-28") as b:
            assert (await a.call_tool("get_ticket_status", args)).is_error is False
            assert (await b.call_tool("get_ticket_status", args)).is_error is False
            assert (await a.call_tool("get_ticket_status", args)).is_error is False
            refused = await b.call_tool("get_ticket_status", args)  # the 4th call, on the other process
            assert refused.is_error and "Rate limit reached" in text_of(refused)
        # the HTTP request limit is shared too: 6 requests in all, across both processes

        from tests.access.test_access_http import post

        codes = [post(server, token).status_code for server in (one, two, one, two, one, two)]
        assert 429 in codes
    finally:
        stop(one.process)
        stop(two.process)
