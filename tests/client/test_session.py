"""One owned session per server: the handshake recorded per connection (discover, or
initialize as fallback), deadlines, a server that dies or stalls, reconnection, and
many tasks sharing one session."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.client.conftest import (
    LEGACY_SERVER,
    REVISIONS,
    TIME_SERVER,
    kit_server,
    ours_stdio,
    stdio,
)
from ticket_server.client import ServerConfig
from ticket_server.client.audit import Audit
from ticket_server.client.session import CallTimeout, ServerSession, ServerUnavailable


def text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def call(session: ServerSession, tool: str, arguments: dict, deadline: float = 20):
    return await session.run(
        lambda c: c.call_tool(tool, arguments), deadline_seconds=deadline, what=tool
    )


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
async def test_our_server_over_stdio_records_the_handshake(db_path: Path, mode, revision, method):
    async with ServerSession(ours_stdio(db_path, mode=mode)) as session:
        result = await call(session, "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert not result.is_error and result.structured_content["id"] == "SUP-4412"
        shake = session.handshake
        assert (shake.method, shake.protocol_version, shake.server_name) == (
            method,
            revision,
            "ticket-server",
        )
        assert "tools" in shake.capabilities and session.handshakes == [shake]


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
async def test_our_server_over_http_records_the_handshake(http_server, mode, revision, method):
    config = ServerConfig(
        name="tickets",
        transport="http",
        url=http_server.url,
        auth={"bearer": http_server.token},
        mode=mode,
    )
    async with ServerSession(config) as session:
        result = await call(session, "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert result.structured_content["id"] == "SUP-4412"
        assert (session.handshake.method, session.handshake.protocol_version) == (method, revision)


async def test_an_http_server_that_forgot_the_session_is_reconnected(
    http_server, db_path: Path, tmp_path: Path
):
    """A legacy HTTP session the server no longer knows (it restarted: HTTP 404 "Session
    not found") fails the call in flight as the server gone away, and the next call
    opens a new session, as MCP says a client must; it never fails every call after."""
    from tests.transports.conftest import start_http_server, stop

    config = ServerConfig(
        name="tickets",
        transport="http",
        url=http_server.url,
        auth={"bearer": http_server.token},
        mode="legacy",
    )
    async with ServerSession(config) as session:
        await call(session, "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        stop(http_server.process)
        again = start_http_server(db_path, tmp_path, port=http_server.port)
        try:
            with pytest.raises(ServerUnavailable, match="went away"):
                await call(session, "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            result = await call(session, "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
            assert result.structured_content["id"] == "SUP-4412"
            assert [h.generation for h in session.handshakes] == [1, 2]
        finally:
            stop(again.process)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("status", [401, 403, 502])
async def test_an_http_refusal_without_a_json_rpc_body_names_its_status(mode, status):
    """Another server or a proxy refusing with a bare HTTP error (no JSON-RPC body) is
    named by its status, so an auth failure reads apart from a server that is down (the
    SDK alone says "Server returned an error response")."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(status)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", "9")
            self.end_headers()
            self.wfile.write(b"<p>no</p>")

        def log_message(self, *args) -> None:
            pass

    http = HTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{http.server_address[1]}/mcp"
        config = ServerConfig(name="proxied", transport="http", url=url, mode=mode)
        async with ServerSession(config) as session:
            with pytest.raises(ServerUnavailable, match=f"could not connect: .*HTTP {status}"):
                await call(session, "anything", {})
    finally:
        http.shutdown()
        http.server_close()


async def test_a_legacy_only_server_falls_back_to_initialize_and_says_so():
    events: list[dict] = []
    async with ServerSession(stdio("legacy", LEGACY_SERVER), audit=Audit(events.append)) as session:
        assert text(await call(session, "echo", {"text": "hi"})) == "hi"
        shake = session.handshake
    assert (shake.method, shake.protocol_version, shake.server_name) == (
        "initialize",
        "2025-11-25",
        "legacy-only",
    )
    handshake = [e for e in events if e["event"] == "handshake"]
    assert handshake[0]["method"] == "initialize" and handshake[0]["server_version"] == "9.9.9"


async def test_an_independent_server_from_pypi():
    async with ServerSession(stdio("clock", TIME_SERVER)) as session:
        result = await call(session, "get_current_time", {"timezone": "UTC"})
        assert not result.is_error and json.loads(text(result))["timezone"] == "UTC"
        assert session.handshake.server_name == "mcp-time"


async def test_a_server_that_dies_mid_call_fails_the_call_and_the_next_call_reconnects():
    async with ServerSession(stdio("plain", kit_server("plain"))) as session:
        await call(session, "echo", {"text": "first"})
        with anyio.fail_after(10):
            with pytest.raises(ServerUnavailable, match="server plain: went away"):
                await call(session, "die", {}, deadline=10)
        assert text(await call(session, "echo", {"text": "again"})) == "again"
        assert [h.generation for h in session.handshakes] == [1, 2]


async def test_a_server_that_stalls_fails_the_call_at_its_deadline_and_stays_usable():
    async with ServerSession(stdio("plain", kit_server("plain"))) as session:
        await call(session, "echo", {"text": "warm"})
        started = anyio.current_time()
        with pytest.raises(CallTimeout, match=r"server plain: stall: no answer within 1 s"):
            await call(session, "stall", {}, deadline=1)
        assert anyio.current_time() - started < 3
        assert text(await call(session, "echo", {"text": "still here"})) == "still here"
        assert len(session.handshakes) == 1


async def test_a_server_that_never_answers_fails_each_call_within_its_deadline():
    async with ServerSession(stdio("mute", kit_server("mute"), connect_seconds=30)) as session:
        for _ in range(2):
            started = anyio.current_time()
            with pytest.raises(CallTimeout, match="no connection was established"):
                await call(session, "echo", {"text": "anyone?"}, deadline=0.5)
            assert anyio.current_time() - started < 2


async def test_a_missing_program_fails_clearly():
    async with ServerSession(stdio("ghost", ["/nonexistent/mcp-server"])) as session:
        with pytest.raises(
            ServerUnavailable, match="server ghost: could not connect: .*No such file"
        ):
            await call(session, "echo", {}, deadline=10)


async def test_100_calls_from_16_tasks_share_one_session_and_none_is_crossed():
    answers: dict[str, str] = {}
    async with ServerSession(stdio("plain", kit_server("plain"))) as session:

        async def worker(w: int) -> None:
            for i in range(w, 100, 16):
                answers[f"call-{i}"] = text(await call(session, "echo", {"text": f"call-{i}"}))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for w in range(16):
                    tg.start_soon(worker, w)
        assert len(session.handshakes) == 1
    assert len(answers) == 100 and all(key == value for key, value in answers.items())


async def test_a_session_that_is_not_open_refuses_calls():
    session = ServerSession(stdio("plain", kit_server("plain")))
    with pytest.raises(ServerUnavailable, match="the session is not open"):
        await call(session, "echo", {"text": "x"})
    async with session:
        pass
    with pytest.raises(ServerUnavailable, match="the session is not open"):
        await call(session, "echo", {"text": "x"})


async def test_a_cancelled_caller_abandons_its_request_and_the_session_goes_on():
    async with ServerSession(stdio("plain", kit_server("plain"))) as session:
        await call(session, "echo", {"text": "warm"})
        with anyio.move_on_after(0.5):
            await call(session, "stall", {}, deadline=60)
        assert text(await call(session, "echo", {"text": "next"})) == "next"
        assert len(session.handshakes) == 1


async def test_a_stdio_server_that_exits_between_calls_is_reconnected_by_the_next_call():
    ended = anyio.Event()

    def sink(event: dict) -> None:
        if event["event"] == "disconnect":
            ended.set()

    async with ServerSession(stdio("plain", kit_server("plain")), audit=Audit(sink)) as session:
        assert text(await call(session, "exit_after_answer", {})) == "bye"
        with anyio.fail_after(10):
            await ended.wait()
        assert text(await call(session, "echo", {"text": "back again"})) == "back again"
        assert [h.generation for h in session.handshakes] == [1, 2]
