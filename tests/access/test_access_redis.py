"""Rate limits shared by two server processes through a real redis-server."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import text_of
from tests.transports.conftest import add_caller, free_port, start_http_server, stop


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing in CI (.ci/install-services.sh installs it)")
        pytest.skip("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


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
        import httpx2 as httpx

        from tests.access.test_access_http import post

        codes = [post(server, token).status_code for server in (one, two, one, two, one, two)]
        assert 429 in codes
    finally:
        stop(one.process)
        stop(two.process)
