"""The real `ticket-server serve` process over stdio."""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters

from tests.helpers import text_of
from tests.transports.conftest import TICKET_SERVER, server_env, stop

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def stdio_params(db_path: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=TICKET_SERVER[0], args=[*TICKET_SERVER[1:], "serve"], env=server_env(db_path, **env)
    )


@pytest.mark.parametrize(
    ("mode", "revision"),
    [("legacy", "2025-11-25"), ("auto", "2026-07-28"), ("2026-07-28", "2026-07-28")],
)
async def test_sdk_client_over_stdio(db_path: Path, mode: str, revision: str) -> None:
    async with Client(stdio_params(db_path), mode=mode) as client:
        assert client.protocol_version == revision
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"get_ticket_status", "search_tickets"} <= names
        result = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-4412"})
        assert result.structured_content == {
            "id": "SUP-4412",
            "status": "waiting_on_customer",
            "owner": "r.mehta",
            "updated": "2026-07-14",
        }
        missing = await client.call_tool("get_ticket_status", {"ticket_id": "SUP-0000000"})
        assert missing.is_error is True and "SUP-0000000" in text_of(missing)


class RawStdio:
    """A spawned server driven frame by frame, keeping every stdout line."""

    def __init__(self, db_path: Path | str, **env: str) -> None:
        # stderr goes to a file: an unread pipe would fill up and block the server's logging.
        self.stderr_file = tempfile.TemporaryFile()  # noqa: SIM115  (closed in close())
        self.process = subprocess.Popen(
            [*TICKET_SERVER, "serve"],
            env=server_env(db_path, **env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
        )
        self.lines: list[bytes] = []
        # stdout is read by a thread into a queue, so that `read` has a deadline that
        # fires even when the server sends nothing (a blocking readline never returns).
        self._frames: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            self._frames.put(line)
        self._frames.put(b"")  # end of output

    def send(self, raw: bytes | dict) -> None:
        data = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def read(self, timeout: float = 20) -> dict:
        try:
            line = self._frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"no answer within {timeout} s; stderr: {self.stderr()[-2000:]}"
            ) from None
        assert line, f"server closed stdout; stderr: {self.stderr()}"
        self.lines.append(line)
        return json.loads(line)

    def read_until_id(self, request_id: int | str) -> dict:
        while True:
            message = self.read()
            if message.get("id") == request_id:
                return message

    def close(self) -> tuple[bytes, bytes]:
        """Close stdin (end of input) and wait for the process; every stdout line is kept."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=20)
        self._reader.join(20)
        while True:
            try:
                line = self._frames.get_nowait()
            except queue.Empty:
                break
            if line:
                self.lines.append(line)
        return b"".join(self.lines), self.stderr().encode()

    def stderr(self) -> str:
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode("utf-8", errors="replace")


def assert_all_jsonrpc(lines: list[bytes]) -> None:
    for line in lines:
        if not line.strip():
            continue
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0", line


def test_c04_invalid_bytes_then_valid_request(db_path: Path) -> None:
    """C04: undecodable bytes get a parse error or nothing; the next request is answered."""
    raw = RawStdio(db_path)
    try:
        raw.send(b"\xff\xfe")
        raw.send(INIT)
        answer = raw.read_until_id(1)
        assert answer["result"]["serverInfo"]["name"] == "ticket-server"
        assert raw.process.poll() is None
        for line in raw.lines:
            message = json.loads(line)
            if "error" in message:
                assert message["error"]["code"] == -32700
    finally:
        raw.close()
        stop(raw.process)
    assert_all_jsonrpc(raw.lines)


def test_c10_debug_logging_200_calls_stdout_is_only_jsonrpc(db_path: Path) -> None:
    """C10: LOG_LEVEL=DEBUG, 200 calls in a row: all answered; stdout only JSON-RPC; logs on stderr."""
    raw = RawStdio(db_path, TICKET_SERVER_LOG_LEVEL="DEBUG")
    raw.send(INIT)
    raw.read_until_id(1)
    raw.send(INITIALIZED)
    answered = set()
    for i in range(200):
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 100 + i,
                "method": "tools/call",
                "params": {"name": "get_ticket_status", "arguments": {"ticket_id": "SUP-4412"}},
            }
        )
        message = raw.read_until_id(100 + i)
        assert message["result"]["isError"] is False
        answered.add(message["id"])
    assert len(answered) == 200
    _, err = raw.close()
    assert raw.process.returncode == 0
    assert_all_jsonrpc(raw.lines)
    log_lines = [line for line in err.decode().splitlines() if line.strip()]
    assert len(log_lines) > 200, "DEBUG logs go to stderr"
    assert all(json.loads(line)["level"] for line in log_lines)


def test_serve_refuses_an_unmigrated_database(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*TICKET_SERVER, "serve"],
        env=server_env(tmp_path / "empty.db"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stdout == b""
    err = proc.stderr.decode().strip()
    assert "ticket-server db upgrade" in err and len(err.splitlines()) == 1


def test_c05a_database_folder_missing(tmp_path: Path) -> None:
    """C05 (a): a URL into a missing folder exits non-zero with one line naming the setting."""
    proc = subprocess.run(
        [*TICKET_SERVER, "serve"],
        env=server_env(tmp_path / "no" / "such" / "dir" / "t.db"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode != 0
    err = proc.stderr.decode().strip()
    assert len(err.splitlines()) == 1, err
    assert "TICKET_SERVER_DATABASE_URL" in err and "does not exist" in err
    assert "Traceback" not in err


def test_raw_stdio_read_deadline_fires(db_path: Path) -> None:
    """The tests' own stdio reader gives up when the server sends nothing (here: no
    request at all), instead of blocking on readline for ever."""
    raw = RawStdio(db_path)
    try:
        with pytest.raises(AssertionError, match="no answer within 1 s"):
            raw.read(timeout=1)
        assert raw.process.poll() is None
    finally:
        raw.close()
        stop(raw.process)


def test_nan_and_infinity_are_parse_errors(db_path: Path) -> None:
    """`NaN` and `Infinity` are not JSON (RFC 8259 section 6): a request holding one is
    -32700 with id null, as over HTTP, and so is one nested past the parser's depth, in
    words that say so; the next request is answered."""
    raw = RawStdio(db_path)
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        for constant in (b"NaN", b"Infinity", b"-Infinity"):
            raw.send(
                b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":'
                b'"search_tickets_v2","arguments":{"query":"refund","limit":' + constant + b"}}}"
            )
            refused = raw.read()
            assert refused["id"] is None and refused["error"]["code"] == -32700, refused
        # Valid JSON nested past the parser's depth: a Parse error that says so.
        raw.send(
            b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":'
            + b"[" * 300
            + b"]" * 300
            + b"}}"
        )
        refused = raw.read()
        assert refused["error"]["code"] == -32700, refused
        assert "nests arrays or objects more deeply" in refused["error"]["message"], refused
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert raw.read_until_id(3)["result"] == {}
    finally:
        raw.close()
        stop(raw.process)


def test_c14_invalid_utf8_is_a_parse_error_and_nothing_runs(db_path: Path) -> None:
    """C14: a tools/call line whose JSON string holds the raw byte 0xE9 (not UTF-8) gets
    -32700 with id null and runs nothing (the SDK's reader would have replaced the byte
    and run it); the next request is answered."""
    import sqlite3

    raw = RawStdio(db_path)
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        raw.send(INITIALIZED)
        raw.send(
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_tickets_v2",'
            b'"arguments":{"query":"caf\xe9"}}}'
        )
        refused = raw.read()
        assert refused["id"] is None and refused["error"]["code"] == -32700
        assert "not UTF-8" in refused["error"]["message"], "said as over HTTP"
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-4412"}},
            }
        )
        assert raw.read_until_id(3)["result"]["isError"] is False
        raw.close()
    finally:
        stop(raw.process)
    with sqlite3.connect(db_path) as conn:
        tools = [row[0] for row in conn.execute("SELECT tool FROM audit_events")]
    assert tools == ["get_ticket_status_v2"]


def test_stdio_server_counts_no_prometheus_metrics(db_path: Path) -> None:
    """Under stdio nothing can scrape /metrics: the serving process answers tool calls
    without importing prometheus-client (it does import what a call needs)."""
    raw = RawStdio(
        db_path, PYTHONPROFILEIMPORTTIME="1"
    )  # `python -X importtime`: one stderr line per import
    raw.send(INIT)
    raw.read_until_id(1)
    raw.send(INITIALIZED)
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_ticket_status_v2", "arguments": {"ticket_id": "SUP-4412"}},
        }
    )
    assert raw.read_until_id(2)["result"]["isError"] is False
    _, err = raw.close()
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in err.decode().splitlines()
        if line.startswith("import time:")
    }
    assert {"sqlalchemy", "ticket_server.access.audit"} <= imported
    assert not {
        name
        for name in imported
        if name.split(".")[0] == "prometheus_client" or name == "ticket_server.metrics"
    }


def test_stray_output_misses_the_wire(db_path: Path) -> None:
    """While serving, fd 1 points at stderr and the frames go out on a private duplicate
    of the wire: a library or child process that prints cannot corrupt the stream."""
    import os

    raw = RawStdio(db_path)
    try:
        raw.send(INIT)
        raw.read_until_id(1)
        pid = raw.process.pid
        assert raw.process.stdout is not None
        wire = f"pipe:[{os.fstat(raw.process.stdout.fileno()).st_ino}]"
        targets = {
            int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
        }
        assert targets[1] == targets[2] != wire
        assert wire in [target for fd, target in targets.items() if fd > 2]
        raw.send(INITIALIZED)
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert raw.read_until_id(2)["result"]["tools"]
    finally:
        raw.close()
        stop(raw.process)
    assert_all_jsonrpc(raw.lines)


async def test_answers_are_written_as_the_sdk_writer_wrote_them() -> None:
    """``write_frames`` writes the bytes the SDK's stdio writer wrote (its
    ``model_dump_json`` text with a newline, UTF-8), one line per message, in order."""
    import io

    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCResponse

    from ticket_server import compat
    from ticket_server.transports.stdio import write_frames

    messages = [
        JSONRPCResponse(
            jsonrpc="2.0", id=3, result={"contents": [{"uri": "x", "blob": "QUJD"}], "é": "ü 💬"}
        ),
        JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=-32700, message="Parse error")),
        JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"p": 0.5}),
    ]
    wire = io.BytesIO()
    send, receive = compat.context_streams(0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(write_frames, receive, wire)
        async with send:
            for message in messages:
                await send.send(SessionMessage(message))
    expected = "".join(
        m.model_dump_json(by_alias=True, exclude_unset=True) + "\n" for m in messages
    ).encode("utf-8")
    assert wire.getvalue() == expected


@given(
    texts=st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=40),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=200, deadline=None)
def test_an_answers_long_texts_go_in_pieces_as_the_same_bytes(texts: list[str]) -> None:
    """``frame_pieces`` joined are ``dump_json``'s bytes, whatever the texts hold
    (quotes, backslashes, control characters, non-ASCII): long ones (over 8 characters
    here) are written a piece at a time, short ones and everything else as they are."""
    from unittest import mock

    from mcp.types import JSONRPCResponse, jsonrpc_message_adapter

    from ticket_server.transports import stdio

    message = JSONRPCResponse(
        jsonrpc="2.0",
        id=7,
        result={
            "contents": [{"uri": f"x{i}", "blob": t, "n": i} for i, t in enumerate(texts)],
            "_meta": {"last": texts[-1], "all": texts},
        },
    )
    expected = jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True)
    with mock.patch.object(stdio, "LONG_TEXT", 8):
        pieces = list(stdio.frame_pieces(message))
    assert b"".join(pieces) == expected
    assert all(len(p) <= len(expected) for p in pieces)
    if any(len(t) > 16 for t in texts):
        assert len(pieces) > 1
