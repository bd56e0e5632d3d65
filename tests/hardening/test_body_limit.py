"""`TICKET_SERVER_MAX_REQUEST_BYTES`: a request body over the limit is answered 413 with a
JSON-RPC error (id null), whether it declares its length or streams it chunked; the
server keeps serving. (The SDK's own 4 MiB limit is tested in test_frames.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.hardening.support import add_caller
from tests.transports.conftest import start_http_server, stop

pytestmark = pytest.mark.sqlite_only
LIMIT = 4096


def _call(request_id: int, ticket_id: str) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "get_ticket_status", "arguments": {"ticket_id": ticket_id}},
        }
    ).encode()


def test_body_over_the_configured_limit_gets_413_with_a_json_rpc_error(
    db_path: Path, tmp_path: Path
) -> None:
    token = add_caller(db_path, "big-bodies")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_MAX_REQUEST_BYTES=str(LIMIT),
        TICKET_SERVER_STATELESS_HTTP="true",
    )
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    try:
        with httpx.Client(timeout=30) as client:
            under = _call(1, "SUP-4412" + " " * (LIMIT - 200))
            assert len(under) <= LIMIT
            ok = client.post(server.url, content=under, headers=headers)
            assert ok.status_code == 200 and "result" in ok.json()  # just under the limit: answered

            over = _call(2, "x" * LIMIT)
            for content in (over, iter([over[:1000], over[1000:3000], over[3000:], b" " * 20_000])):
                refused = client.post(
                    server.url, content=content, headers=headers
                )  # declared / chunked
                assert refused.status_code == 413
                body = refused.json()
                assert body["jsonrpc"] == "2.0" and body["id"] is None
                assert body["error"]["code"] == -32600 and str(LIMIT) in body["error"]["message"]

            after = client.post(server.url, content=_call(3, "SUP-4412"), headers=headers)
            assert after.status_code == 200 and after.json()["result"]["isError"] is False
        assert server.process.poll() is None
    finally:
        stop(server.process)
