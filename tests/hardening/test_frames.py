"""Raw frames over stdio and HTTP: invalid JSON, non-UTF-8 bytes, a 10 MiB line,
batches, wrong ``jsonrpc`` values, ids of every type, unknown methods, requests
before the handshake. Each gets the JSON-RPC 2.0 error the spec names (section 5.1:
-32700 Parse error, -32600 Invalid Request, -32601 Method not found, all with
``"id": null`` when no id could be read), and the next valid request is answered."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from hypothesis import given, strategies

from tests.hardening.support import add_caller
from tests.helpers import assert_no_leak
from tests.transports.conftest import start_http_server, stop
from tests.transports.test_stdio import INIT, INITIALIZED, RawStdio, assert_all_jsonrpc

pytestmark = pytest.mark.sqlite_only

TEN_MIB = 10 * 1024 * 1024
UNREADABLE = [  # (frame, the code JSON-RPC names)
    (b"{not json", -32700),
    (b"\xff\xfe\xfd", -32700),
    (b'{"jsonrpc":"2.0","id":2,"method":"tools/list"', -32700),
    (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_ticket_status","arguments":{"ticket_id":"\\ud800"}}}',
        -32700,
    ),
    (b"[" * 5000 + b"]" * 5000, -32700),
    (b'[{"jsonrpc":"2.0","id":4,"method":"ping"}]', -32600),
    (b"[]", -32600),
    (b'{"jsonrpc":"1.0","id":5,"method":"ping"}', -32600),
    (b'{"id":6,"method":"ping"}', -32600),
    (b'"just a string"', -32600),
    (b"42", -32600),
    (b"null", -32600),
    (b'{"jsonrpc":"2.0","id":7}', -32600),
]
# Ids MCP forbids (null, a fraction, a whole number written as one, a boolean, an object,
# an array): the SDK would read such a request as a notification and never answer it.
ODD_IDS = [b"null", b"1.5", b"1.0", b"true", b'{"a":1}', b"[1]"]


def _tools_call(request_id: int | str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "get_ticket_status", "arguments": arguments},
    }


def test_stdio_frames_get_the_error_the_spec_names(db_path: Path) -> None:
    """C04 widened: every unreadable frame over stdio is answered with -32700 or
    -32600 (id null); the next valid request is answered; the process stays up."""
    raw = RawStdio(db_path)
    try:
        raw.send({"jsonrpc": "2.0", "id": "early", "method": "tools/list"})  # before the handshake
        early = raw.read_until_id("early")
        assert "result" in early or early["error"]["code"] in (-32600, -32601, -32602)
        raw.send(INIT)
        assert raw.read_until_id(1)["result"]["serverInfo"]["name"] == "ticket-server"
        raw.send(INITIALIZED)
        for n, (frame, code) in enumerate(UNREADABLE):
            raw.send(frame)
            answer = raw.read()
            assert answer == {"jsonrpc": "2.0", "id": None, "error": answer["error"]}, answer
            assert answer["error"]["code"] == code, (frame[:60], answer)
            raw.send({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/list"})
            assert "result" in raw.read_until_id(1000 + n), "the next valid request is answered"
        for n, odd in enumerate(ODD_IDS):
            raw.send(b'{"jsonrpc":"2.0","id":' + odd + b',"method":"ping"}')
            refused = raw.read()  # answered at once, as over HTTP
            assert refused["id"] is None and refused["error"]["code"] == -32600, (odd, refused)
            raw.send({"jsonrpc": "2.0", "id": 2000 + n, "method": "tools/list"})
            assert "result" in raw.read_until_id(2000 + n)
        raw.send({"jsonrpc": "2.0", "id": 9, "method": "no/such/method"})
        assert raw.read_until_id(9)["error"]["code"] == -32601
        for request_id in ("a string id", 0, -1, 2**53):
            raw.send(_tools_call(request_id, {"ticket_id": "SUP-4412"}))
            assert raw.read_until_id(request_id)["result"]["isError"] is False
        raw.send(_tools_call(10, {"ticket_id": "x" * TEN_MIB}))  # a 10 MiB line
        big = raw.read_until_id(10)
        assert big["result"]["isError"] is True and len(json.dumps(big)) < 2000
        raw.send(_tools_call(11, {"ticket_id": "SUP-4412"}))
        assert raw.read_until_id(11)["result"]["isError"] is False
        assert raw.process.poll() is None, "still running"
    finally:
        raw.close()
        stop(raw.process)
    assert raw.process.returncode == 0
    assert_all_jsonrpc(raw.lines)
    for line in raw.lines:
        assert_no_leak(line.decode("utf-8", "replace")[:5000])


@pytest.fixture
def http(db_path: Path, tmp_path: Path):
    token = add_caller(db_path, "frames")
    server = start_http_server(db_path, tmp_path)
    try:
        yield server, token
    finally:
        stop(server.process)


def test_http_frames_get_a_json_rpc_error_and_the_server_keeps_serving(http) -> None:
    """Over HTTP each unreadable body gets a 4xx with a JSON-RPC error (id null),
    no internals; a 10 MiB body is refused with 413; the next request is answered."""
    server, token = http
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    with httpx.Client(timeout=30) as client:
        init = client.post(server.url, json=INIT, headers=headers)
        assert init.status_code == 200
        if init.headers.get("mcp-session-id"):
            headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
        client.post(server.url, json=INITIALIZED, headers=headers)
        for n, (frame, code) in enumerate(UNREADABLE):
            response = client.post(server.url, content=frame, headers=headers)
            assert 400 <= response.status_code < 500, (frame[:60], response.status_code)
            body = response.json()
            assert body["jsonrpc"] == "2.0" and body.get("id") is None
            assert body["error"]["code"] == code, (frame[:60], body)
            assert "validation" not in body["error"]["message"].lower(), (
                body
            )  # no validator internals
            follow = client.post(
                server.url,
                json={"jsonrpc": "2.0", "id": n + 100, "method": "tools/list"},
                headers=headers,
            )
            assert follow.status_code == 200 and "result" in follow.json()
        unknown = client.post(
            server.url, json={"jsonrpc": "2.0", "id": 5, "method": "no/such"}, headers=headers
        )
        assert unknown.json()["error"]["code"] == -32601
        huge = client.post(
            server.url,
            content=json.dumps(_tools_call(6, {"ticket_id": "x" * TEN_MIB})),
            headers=headers,
        )
        assert huge.status_code == 413
        ok = client.post(
            server.url, json=_tools_call(7, {"ticket_id": "SUP-4412"}), headers=headers
        )
        assert ok.status_code == 200 and ok.json()["result"]["isError"] is False
    assert server.process.poll() is None


def test_a_body_refused_for_its_size_is_read_and_dropped_so_the_413_arrives(http) -> None:
    """A body declared over ``max_request_bytes`` is answered 413 from its headers, then
    the server reads and drops what the client still sends before it closes (RFC 9112
    section 9.6): closing with bytes unread makes the kernel reset the connection, which
    can destroy the answer before the client reads it. The client here sends part of the
    body, waits past the moment the answer is sent, and must still read the whole 413;
    once it sends the rest, the server closes cleanly (no reset)."""
    server, token = http
    size = 5 * 1024 * 1024
    head = "".join(
        f"{k}: {v}\r\n"
        for k, v in {
            "Host": f"127.0.0.1:{server.port}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            "Content-Length": str(size),
        }.items()
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + b"x" * 256 * 1024)
        time.sleep(0.5)  # the 413 is out; an unread body would have reset the connection
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, f"connection closed before the whole answer: {answer!r}"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 413 ")
        body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        assert body["error"]["code"] == -32600 and "too large" in body["error"]["message"]
        sock.sendall(b"x" * (size - 256 * 1024))
        assert sock.recv(65536) == b""  # closed cleanly once the body is in


def test_a_whole_chunked_body_over_the_limit_is_refused_without_waiting(http) -> None:
    """A chunked body (no declared size) found over the limit once it has all arrived: its
    413 comes and the connection is closed at once, with nothing left to read and drop;
    the server does not wait (10 s here) for a client that keeps the connection open."""
    server, token = http
    chunk = b"x" * (300 * 1024)  # over the default 256 KiB
    request = (
        (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode()
        + f"{len(chunk):x}\r\n".encode()
        + chunk
        + b"\r\n0\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        while data := sock.recv(65536):  # a socket timeout here: the server waited
            answer += data
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


def test_a_client_that_expects_100_continue_is_refused_without_being_waited_for(http) -> None:
    """A body declared too large with ``Expect: 100-continue`` gets its 413 and the
    connection closed at once: the client was never asked for the body, so the server does
    not wait (10 s here) for bytes to drop, and never sends ``100 Continue``."""
    server, token = http
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nExpect: 100-continue\r\n"
        f"Content-Length: {TEN_MIB}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):  # a socket timeout here: the server waited
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"100 Continue" not in answer


# --- the token count told before parsing (issue 16, item 2) -------------------------------


def _values(value: object) -> int:
    if isinstance(value, dict):
        return 1 + sum(_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_values(v) for v in value)
    return 1


_TEXT = strategies.text(alphabet=strategies.sampled_from('a,"\\[]{}:é\u2028 '), max_size=12)
_JSON = strategies.recursive(
    strategies.none()
    | strategies.booleans()
    | strategies.integers()
    | strategies.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: (
        strategies.lists(inner, max_size=6) | strategies.dictionaries(_TEXT, inner, max_size=6)
    ),
    max_leaves=60,
)


def test_the_token_count_never_falls_below_the_values_a_message_holds() -> None:
    """``too_many_tokens`` decides without parsing, so it must never let through a body
    that holds more values than its limit, whatever the strings hold (quotes, backslashes,
    commas, brackets) and however the JSON is spaced; and a body within the count passes."""
    from tests.hardening.conftest import profile
    from ticket_server.transports.frames import too_many_tokens

    @profile(0.5)
    @given(_JSON, strategies.booleans(), strategies.booleans())
    def check(value: object, indent: bool, ascii_only: bool) -> None:
        body = json.dumps(value, indent=1 if indent else None, ensure_ascii=ascii_only).encode()
        values = _values(value)
        assert too_many_tokens(body, max(0, values - 2)) or values < 2
        assert not too_many_tokens(body, 3 * values)

    check()


def test_a_call_at_the_arguments_bounds_is_within_the_token_limit() -> None:
    from ticket_server.tools.errors import MAX_ARGUMENT_VALUES
    from ticket_server.transports.frames import MAX_MESSAGE_TOKENS, too_many_tokens

    for arguments in (
        {"status": ["open"] * MAX_ARGUMENT_VALUES},
        {f"k{i}": f"v{i}" for i in range(MAX_ARGUMENT_VALUES // 2)},
    ):
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "search_tickets_v2", "arguments": arguments},
            }
        ).encode()
        assert not too_many_tokens(body)
    assert too_many_tokens(json.dumps({"a": list(range(MAX_MESSAGE_TOKENS))}).encode())
