"""Cheap, clear refusals over HTTP (issue 32): two credentials (C29), a 401 that closes
the connection unread, an address past its limit refused before any token lookup, an
Accept or Content-Type the server cannot honour, a body that is not UTF-8, and a
foreign Host. A real server on loopback (`http_server`: one caller, `tester`)."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path

import httpx2 as httpx

from tests.access.conftest import MODERN_META
from tests.transports.conftest import add_caller, start_http_server, stop

# A 2026-07-28 tools/list: served without a session.
PING = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": MODERN_META}}
MODERN = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
JSON = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    **MODERN,
}


def test_c29_two_credentials_are_refused_in_every_order(http_server) -> None:
    """C29: two `Authorization` headers (the valid token and another, in both orders),
    and one header holding two `Bearer` values (both orders): each is 400 with the same
    JSON-RPC error, never served; the valid token alone is served."""
    good, bad = f"Bearer {http_server.token}", "Bearer tks_not_a_token"
    sent = [
        [("Authorization", good), ("Authorization", bad)],
        [("Authorization", bad), ("Authorization", good)],
        [("Authorization", f"{good}, {bad}")],
        [("Authorization", f"{bad}, {good}")],
        [("Authorization", f"{good} {bad}")],
    ]
    answers = [httpx.post(http_server.url, json=PING, headers=[*JSON.items(), *h]) for h in sent]
    assert [a.status_code for a in answers] == [400] * len(sent), [a.text for a in answers]
    assert len({a.text for a in answers}) == 1
    error = answers[0].json()["error"]
    assert "exactly one Authorization header" in error["message"]
    assert 'error="invalid_request"' in answers[0].headers["www-authenticate"]
    served = httpx.post(http_server.url, json=PING, headers={**JSON, "Authorization": good})
    assert served.status_code == 200 and served.json()["result"]["tools"]
    assert http_server.token not in http_server.logs()


def _head(port: int, extra: str = "", length: int = 2**30) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {length}\r\n{extra}\r\n"
    ).encode()


def test_a_401_closes_the_connection_without_reading_the_body(http_server) -> None:
    """A request announcing a 1 GiB body without a token gets 401 with `Connection:
    close`, and the server closes the connection at once instead of reading the body."""
    with socket.create_connection(("127.0.0.1", http_server.port), timeout=10) as sock:
        sock.sendall(_head(http_server.port) + b'{"jsonrpc": "2.0", ' + b" " * 65536)
        received = b""
        started = time.monotonic()
        while chunk := sock.recv(65536):  # b"" once the server has closed
            received += chunk
        assert time.monotonic() - started < 5
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 401") and b"connection: close" in head


def test_past_its_limit_an_address_is_refused_before_any_token_lookup(
    db_path: Path, tmp_path: Path
) -> None:
    """Once an address has had its 5 tokenless refusals of the minute, a random bearer
    token is answered 429 without a lookup: with the callers table renamed away, a
    lookup would answer 503 instead. A valid token the server already knows (cached)
    is still served."""
    token = add_caller(db_path, "steady")
    server = start_http_server(
        db_path,
        tmp_path,
        TICKET_SERVER_HTTP_RATE_LIMIT="5/minute",
        TICKET_SERVER_CALLER_CACHE_SECONDS="600",
    )
    try:
        with httpx.Client(timeout=10) as http:
            known = {**JSON, "Authorization": f"Bearer {token}"}
            assert http.post(server.url, json=PING, headers=known).status_code == 200
            first = [http.post(server.url, json=PING, headers=JSON).status_code for _ in range(5)]
            assert first == [401] * 5
            with sqlite3.connect(db_path) as conn:
                conn.execute("ALTER TABLE callers RENAME TO callers_away")
            try:
                random_tokens = [
                    http.post(
                        server.url, json=PING, headers={**JSON, "Authorization": f"Bearer r{n}"}
                    )
                    for n in range(5)
                ]
                cached = http.post(server.url, json=PING, headers=known)
            finally:
                with sqlite3.connect(db_path) as conn:
                    conn.execute("ALTER TABLE callers_away RENAME TO callers")
        assert [a.status_code for a in random_tokens] == [429] * 5, [a.text for a in random_tokens]
        assert random_tokens[0].headers["connection"] == "close"
        assert cached.status_code == 200
    finally:
        stop(server.process)


def test_accept_content_type_and_encoding_are_refused_in_words(http_server) -> None:
    """`Accept: text/event-stream` alone is 406 with a JSON-RPC error on both revisions
    (it was an empty 406 on 2026-07-28); `Content-Type: application/jsonx` is 415, as is
    a charset other than UTF-8; a UTF-16 body is a Parse error (-32700). Nothing is
    served."""
    auth = {"Authorization": f"Bearer {http_server.token}"}
    legacy = {"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": ""}
    for revision in (legacy, MODERN):
        refused = httpx.post(
            http_server.url,
            json=PING,
            headers={**JSON, **auth, **revision, "Accept": "text/event-stream"},
        )
        assert refused.status_code == 406, refused.text
        assert "Accept: application/json" in refused.json()["error"]["message"]
    for media in ("application/jsonx", "text/plain", "application/json; charset=utf-16"):
        refused = httpx.post(
            http_server.url, json=PING, headers={**JSON, **auth, "Content-Type": media}
        )
        assert refused.status_code == 415, (media, refused.text)
        assert "Content-Type: application/json" in refused.json()["error"]["message"]
    utf16 = httpx.post(
        http_server.url,
        content=json.dumps(PING).encode("utf-16"),
        headers={**JSON, **auth},
    )
    assert utf16.status_code == 400, utf16.text
    assert utf16.json()["error"]["code"] == -32700 and "UTF-8" in utf16.text
    # NaN and Infinity are not JSON (RFC 8259 section 6): a Parse error, as over stdio.
    nan = httpx.post(
        http_server.url,
        content=json.dumps(PING).replace('"id": 7', '"id": 7, "x": NaN').encode(),
        headers={**JSON, **auth},
    )
    assert nan.status_code == 400 and nan.json()["error"]["code"] == -32700, nan.text
    # Valid JSON nested past the parser's depth: a Parse error that says so (it said
    # "not valid JSON").
    deep = b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":'
    deep += b"[" * 3000 + b"]" * 3000 + b"}}"
    nested = httpx.post(http_server.url, content=deep, headers={**JSON, **auth})
    assert nested.status_code == 400 and nested.json()["error"]["code"] == -32700, nested.text
    assert "nests arrays or objects more deeply" in nested.json()["error"]["message"]
    assert httpx.post(http_server.url, json=PING, headers={**JSON, **auth}).status_code == 200


def test_a_foreign_host_is_told_which_setting_admits_it(http_server) -> None:
    """A `Host` the server does not answer to gets 421 naming
    TICKET_SERVER_ALLOWED_HOSTS (it said only "Misdirected Request")."""
    refused = httpx.post(
        http_server.url,
        json=PING,
        headers={**JSON, "Host": "tickets.example.com", "Authorization": "Bearer x"},
    )
    assert refused.status_code == 421
    message = refused.json()["error"]["message"]
    assert "TICKET_SERVER_ALLOWED_HOSTS" in message and "tickets.example.com" in message


def test_a_token_in_the_url_is_refused_even_beside_a_valid_header(http_server) -> None:
    """MCP's authorization forbids tokens in the URI query string (RFC 6750's
    `access_token` parameter), and RFC 6750 section 2 more than one method per request:
    one beside a valid Authorization header is 400 and not served, whatever the
    parameter's case or value (alone it is no credential: 401); the token is not logged.
    Other query parameters do not matter."""
    good = {**JSON, "Authorization": f"Bearer {http_server.token}"}
    for query in (f"access_token={http_server.token}", "ACCESS_TOKEN=x", "a=1&access_token"):
        answer = httpx.post(f"{http_server.url}?{query}", json=PING, headers=good)
        assert answer.status_code == 400, (query, answer.text)
        assert "never in the URL" in answer.json()["error"]["message"]
    served = httpx.post(f"{http_server.url}?tokenish=1", json=PING, headers=good)
    assert served.status_code == 200 and served.json()["result"]["tools"]
    assert http_server.token not in http_server.logs()


def test_a_token_in_the_url_is_refused_however_its_name_is_encoded(http_server) -> None:
    """A query parameter's name is percent-decoded by every URL parser (``access%5Ftoken``
    is ``access_token``), so such a name beside a valid header is a token in the URL too:
    400, not served (a review found these three served). A name that decodes to another
    one (``access_token=x`` as one encoded name, a leading space) is not it."""
    good = {**JSON, "Authorization": f"Bearer {http_server.token}"}
    for query in ("access%5Ftoken=x", "%61ccess_token=x", "access%5ftoken", "ACCESS%5FTOKEN=x"):
        answer = httpx.post(f"{http_server.url}?{query}", json=PING, headers=good)
        assert answer.status_code == 400, (query, answer.text)
        assert "never in the URL" in answer.json()["error"]["message"]
    for query in ("access_token%3Dx", "%20access_token=x", "access_tokens=x"):
        served = httpx.post(f"{http_server.url}?{query}", json=PING, headers=good)
        assert served.status_code == 200, (query, served.text)
