"""Only the MCP endpoint speaks JSON-RPC; every other path answers as a plain web server,
and the MCP endpoint asks for a token before it reads a body."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from tests.transports.conftest import HttpServer

pytestmark = pytest.mark.sqlite_only
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
NOT_JSON_RPC = b'{"hello": "world"}'


def test_other_paths_answer_as_a_plain_web_server(http_server: HttpServer) -> None:
    """C23: OAuth discovery probes (mcp-remote without --header) get 404/405, never JSON-RPC."""
    with httpx.Client(base_url=http_server.base, timeout=30) as client:
        for method, path in [
            ("POST", "/register"),
            ("GET", "/.well-known/oauth-authorization-server"),
            ("GET", "/.well-known/openid-configuration"),
            ("POST", "/token"),
            ("POST", "/"),
        ]:
            answer = client.request(
                method, path, content=b"{}", headers={"Content-Type": "application/json"}
            )
            assert answer.status_code == 404, (method, path, answer.status_code, answer.text)
            assert "jsonrpc" not in answer.text, (method, path, answer.text)
        answer = client.post(
            "/healthz", content=NOT_JSON_RPC, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 405 and "jsonrpc" not in answer.text


def test_mcp_without_a_token_is_401_before_its_body_is_read(http_server: HttpServer) -> None:
    """C23: no token (or a wrong one) and a body that is not JSON-RPC: 401 with WWW-Authenticate."""
    with httpx.Client(timeout=30) as client:
        for headers in (MCP_HEADERS, {**MCP_HEADERS, "Authorization": "Bearer not-a-token"}):
            for body in (NOT_JSON_RPC, b"not json at all", b"[]"):
                answer = client.post(http_server.url, content=body, headers=headers)
                assert answer.status_code == 401, (body, answer.status_code, answer.text)
                assert answer.headers["www-authenticate"].startswith("Bearer"), answer.headers
        # With the token the same body is an Invalid Request, as before.
        answer = client.post(
            http_server.url,
            content=NOT_JSON_RPC,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {http_server.token}"},
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == -32600
