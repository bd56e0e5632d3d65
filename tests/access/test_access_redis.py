"""Rate limits shared by two server processes through a real redis-server."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from tests.access.test_access_http import post
from tests.helpers import text_of
from tests.services import redis_server, redis_url  # noqa: F401  (fixtures)
from tests.transports.conftest import add_caller, start_http_server, stop

TOOL_LIMIT, HTTP_LIMIT = 3, 6


async def test_two_processes_share_the_limits_through_redis(
    db_path: Path, tmp_path: Path, redis_url: str
) -> None:
    """One caller's limits count across two processes: of 2 x TOOL_LIMIT tool calls
    alternating between the processes exactly TOOL_LIMIT are answered, the rest refused;
    of 2 x HTTP_LIMIT HTTP requests (another caller) exactly HTTP_LIMIT get 200, the rest
    429. With per-process counters each process would allow its own full share."""
    token = add_caller(
        db_path, "shared", tool_rate_limit=f"{TOOL_LIMIT}/minute", http_rate_limit="1000/minute"
    )
    flooder = add_caller(db_path, "flooder", http_rate_limit=f"{HTTP_LIMIT}/minute")
    env = {
        "TICKET_SERVER_RATE_LIMIT_STORAGE_URL": redis_url,
        "TICKET_SERVER_STATELESS_HTTP": "true",
    }
    one = start_http_server(db_path, tmp_path, **env)
    two = start_http_server(db_path, tmp_path, **env)
    try:
        args = {"ticket_id": "SUP-4412"}
        async with (
            Client(one.transport(token), mode="2026-07-28") as a,
            Client(two.transport(token), mode="2026-07-28") as b,
        ):
            results = [
                await client.call_tool("get_ticket_status", args) for client in (a, b) * TOOL_LIMIT
            ]
        assert [r.is_error for r in results] == [False] * TOOL_LIMIT + [True] * TOOL_LIMIT, [
            text_of(r) for r in results
        ]
        assert all("Rate limit reached" in text_of(r) for r in results[TOOL_LIMIT:])

        codes = [post(server, flooder).status_code for server in (one, two) * HTTP_LIMIT]
        assert codes == [200] * HTTP_LIMIT + [429] * HTTP_LIMIT, codes
    finally:
        stop(one.process)
        stop(two.process)
