"""Each touch of a library's internals in ticket_server/compat.py, checked against the
installed versions: an upgrade that renames or reshapes one fails here, by name."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import subprocess
import sys

import pytest
import uvicorn
from fastmcp import Client, Context, FastMCP
from fastmcp.resources import ResourceResult
from mcp.shared.message import SessionMessage

from ticket_server import compat


async def test_lifespan_manager_runs_the_servers_lifespan() -> None:
    events: list[str] = []

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(server: FastMCP):  # type: ignore[no-untyped-def]
        events.append("start")
        yield {}
        events.append("stop")

    async with compat.lifespan(FastMCP("t", lifespan=lifespan)):
        assert events == ["start"]
    assert events == ["start", "stop"]


def test_low_level_server_run_and_initialization_options_exist() -> None:
    low = FastMCP("t")._mcp_server
    assert inspect.iscoroutinefunction(low.run)
    assert list(inspect.signature(low.run).parameters)[:3] == [
        "read_stream",
        "write_stream",
        "initialization_options",
    ]
    assert low.create_initialization_options() is not None


async def test_context_streams_carry_session_messages() -> None:
    import mcp.types as mt

    send, receive = compat.context_streams(1)
    message = SessionMessage(
        mt.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
    )
    await send.send(message)
    assert (await receive.receive()).message == message.message


def test_claim_stdout_diverts_fd_1_to_stderr_and_gives_back_the_wire() -> None:
    """Run in a child process, whose fd 1 is a pipe: the claim hands back a duplicate of
    the pipe, points fd 1 at stderr, and its release points fd 1 back at the pipe."""
    program = """
import os, sys
from ticket_server import compat
before = os.readlink("/proc/self/fd/1")
wire, restore = compat.claim_stdout()
during = os.readlink("/proc/self/fd/1")
wire.write(b"on the wire\\n"); wire.flush()
os.write(1, b"stray\\n")
restore()
after = os.readlink("/proc/self/fd/1")
assert during == os.readlink("/proc/self/fd/2") != before == after, (before, during, after)
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"on the wire\n"
    assert done.stderr.endswith(b"stray\n")


async def test_a_base64_resource_content_goes_out_as_its_blob() -> None:
    mcp = FastMCP("t")

    @mcp.resource("test://file/{name}", mime_type="application/octet-stream")
    def file(name: str) -> ResourceResult:
        return ResourceResult(
            [compat.base64_resource_content("QUJD", "application/pdf", {"k": name})]
        )

    async with Client(mcp) as client:
        (content,) = await client.read_resource("test://file/x")
    assert content.blob == "QUJD"
    assert content.mimeType == "application/pdf"
    assert content.meta == {"k": "x"}


async def test_header_lookup_hook_is_honoured_by_the_low_level_server() -> None:
    mcp = FastMCP("t")

    @mcp.tool
    def ping() -> str:
        return "pong"

    await compat.skip_listing_for_header_checks(mcp)
    assert mcp._mcp_server.get_tool_input_schema("ping") is None
    async with Client(mcp) as client:  # the server still answers with the hook in place
        assert (await client.call_tool("ping")).data == "pong"


def test_uvicorn_server_keeps_captured_signals() -> None:
    server = compat.graceful_uvicorn_server(uvicorn.Config(app=None))
    assert isinstance(server, uvicorn.Server)
    assert hasattr(server, "_captured_signals")


def test_h11_header_deadline_protocol() -> None:
    """The uvicorn internals the header deadline leans on are still there."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    protocol = compat.h11_with_header_deadline(1.0)
    assert issubclass(protocol, H11Protocol)
    for name in ("connection_made", "on_response_complete", "connection_lost"):
        assert callable(getattr(H11Protocol, name))
    assert h11.IDLE is not None and "cycle" in H11Protocol.__init__.__code__.co_names


async def test_h11_connections_send_without_waiting_for_acknowledgements() -> None:
    """A connection accepted on a listening socket made as uvicorn's ``bind_socket``
    makes it (protocol 0, where asyncio sets no ``TCP_NODELAY``) gets ``TCP_NODELAY``
    from the protocol: without it an answer written in two pieces waited about 40 ms for
    the client's delayed acknowledgement."""
    import socket

    from uvicorn.server import ServerState

    config = uvicorn.Config(app=lambda scope, receive, send: None, log_config=None)
    config.load()
    state = ServerState()
    protocol = compat.h11_with_header_deadline(5.0)
    listener = socket.socket(socket.AF_INET)
    listener.bind(("127.0.0.1", 0))
    assert listener.proto == 0
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: protocol(config=config, server_state=state, app_state={}), sock=listener
    )
    try:
        _, writer = await asyncio.open_connection(*listener.getsockname())
        for _ in range(100):
            if state.connections:
                break
            await asyncio.sleep(0.01)
        (connection,) = state.connections
        sock = connection.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_request_middleware_sees_raw_params_before_validation() -> None:
    mcp = FastMCP("t")
    seen: list[object] = []

    @mcp.tool
    def echo(text: str) -> str:
        return text

    async def middleware(ctx, call_next):  # type: ignore[no-untyped-def]
        if ctx.method == "tools/call":
            seen.append(ctx.params["arguments"])
            from dataclasses import replace

            return await call_next(
                replace(ctx, params={**ctx.params, "arguments": {"text": "rewritten"}})
            )
        return await call_next(ctx)

    compat.add_request_middleware(mcp, middleware)
    async with Client(mcp) as client:
        assert (await client.call_tool("echo", {"text": "sent"})).data == "rewritten"
    assert seen == [{"text": "sent"}]


async def test_invalid_request_state_is_handed_to_the_named_tools_only() -> None:
    """The SDK's request-state boundary still seals and verifies; a state it rejects
    reaches a named tool as the marker, and every other tool keeps the -32602 error."""
    import pytest
    from mcp.shared.exceptions import MCPError
    from mcp.types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

    mcp = FastMCP("t")

    def asking(ctx: Context) -> object:
        if ctx.request_state is None:
            ask = ElicitRequest(
                params=ElicitRequestFormParams(
                    message="ok?", requested_schema={"type": "object", "properties": {}}
                )
            )
            return InputRequiredResult(input_requests={"q": ask}, request_state="minted")
        return f"state {ctx.request_state}"

    @mcp.tool
    def guarded(ctx: Context) -> str:
        return asking(ctx)  # type: ignore[return-value]

    @mcp.tool
    def other(ctx: Context) -> str:
        return asking(ctx)  # type: ignore[return-value]

    compat.hand_invalid_request_state_to(mcp, ["guarded"], "MARKER")
    async with Client(mcp, mode="2026-07-28") as client:
        for name in ("guarded", "other"):
            first = await client.session.call_tool(name, {}, allow_input_required=True)
            assert (
                isinstance(first, InputRequiredResult) and first.request_state != "minted"
            )  # sealed on the wire
            good = await client.session.call_tool(
                name, {}, request_state=first.request_state, allow_input_required=True
            )
            assert good.content[0].text == "state minted"
        first = await client.session.call_tool("guarded", {}, allow_input_required=True)
        bad = await client.session.call_tool(
            "guarded", {}, request_state=first.request_state[:-2] + "xx", allow_input_required=True
        )
        assert bad.content[0].text == "state MARKER"
        first = await client.session.call_tool("other", {}, allow_input_required=True)
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool(
                "other",
                {},
                request_state=first.request_state[:-2] + "xx",
                allow_input_required=True,
            )


def test_memory_storage_counts_as_shipped_and_drops_expired_entries_on_the_callers_thread(
    monkeypatch,
) -> None:
    """The moving window counts as `limits` ships it; no hit starts a timer thread; a hit
    at least ``EXPIRY_SECONDS`` after the last drop drops the entries that expired."""
    import time

    from limits import parse
    from limits.storage import MemoryStorage
    from limits.strategies import MovingWindowRateLimiter

    now = [time.time()]
    monkeypatch.setattr(time, "time", lambda: now[0])
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    storage = compat.memory_storage()
    assert isinstance(storage, MemoryStorage)
    timer = storage.timer
    limiter, item = MovingWindowRateLimiter(storage), parse("2/second")

    assert [limiter.hit(item, "tool", "ann") for _ in range(3)] == [True, True, False]
    assert [limiter.hit(item, "tool", "bob") for _ in range(2)] == [True, True]
    assert storage.timer is timer  # no timer thread started after the first
    assert sum(map(len, storage.events.values())) == 4

    now[0] += compat.EXPIRY_SECONDS + 1.5  # past both the window and the drop interval
    assert limiter.hit(item, "tool", "ann")
    assert sum(map(len, storage.events.values())) == 1  # ann's new entry only
    assert storage.timer is timer


def test_stream_sessions_flag_clears_json_responses_of_transports_made_under_it() -> None:
    """The SDK's Streamable HTTP transport still takes ``is_json_response_enabled`` in its
    constructor and keeps it as the attribute its POST handler and router read; one made
    while the flag is set answers in SSE streams, any other keeps JSON."""
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    flag = compat.stream_sessions_when()
    assert compat.stream_sessions_when() is flag  # installed once
    plain = StreamableHTTPServerTransport(mcp_session_id="a", is_json_response_enabled=True)
    assert plain.is_json_response_enabled is True
    reset = flag.set(True)
    try:
        streamed = StreamableHTTPServerTransport(mcp_session_id="b", is_json_response_enabled=True)
    finally:
        flag.reset(reset)
    assert streamed.is_json_response_enabled is False
    source = inspect.getsource(StreamableHTTPServerTransport)
    assert source.count("self.is_json_response_enabled") >= 3  # POST handler, router, metadata


def test_a_server_starts_without_importing_requests() -> None:
    """``compat.dereference_refs`` imports ``jsonref`` with ``requests`` hidden: a built
    server has neither ``requests`` nor its dependencies in memory, and ``jsonref`` holds
    no ``requests`` (remote ``$ref``s, which FastMCP strips anyway, are all it would
    fetch). The second part checks that the shim is still needed: ``jsonref`` imported
    alone still imports ``requests``; when it stops, drop the shim."""
    built = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from ticket_server.server import build_server; "
            "from ticket_server.settings import Settings; "
            "build_server(Settings(database_url='sqlite+aiosqlite:///unused.db')); "
            "print(sorted(m for m in ('requests', 'urllib3', 'charset_normalizer') "
            "if m in sys.modules), sys.modules['jsonref'].requests)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert built.stdout.split() == ["[]", "None"], built.stdout
    alone = subprocess.run(
        [sys.executable, "-c", "import sys, jsonref; print('requests' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert alone.stdout.strip() == "True"


_REQUEST: contextvars.ContextVar[object] = contextvars.ContextVar("request")


def _timers_holding(loop: asyncio.AbstractEventLoop, value: object) -> int:
    """The loop's scheduled timers (cancelled ones included) whose context holds ``value``
    in ``_REQUEST``."""
    scheduled = loop._scheduled  # type: ignore[attr-defined]
    return sum(1 for h in scheduled if h._context is not None and h._context.get(_REQUEST) is value)


async def test_a_cancelled_timer_keeps_its_context_and_deadline_schedules_outside_it() -> None:
    """asyncio keeps a cancelled timer, and the context it was scheduled in, until its due
    time: the reason for ``compat.deadline``. This fails the day asyncio stops keeping
    the context; ``deadline`` can then be plain ``asyncio.timeout``."""
    loop = asyncio.get_running_loop()
    # A live timer due first stays at the heap's top, as a server's always do: the loop
    # drops cancelled timers from the top, or all at once when they are over half of
    # more than 100.
    live = loop.call_later(300, lambda: None)
    request = object()
    _REQUEST.set(request)
    async with asyncio.timeout(600):
        await asyncio.sleep(0)
    assert _timers_holding(loop, request) == 1, "asyncio's own timeout keeps the context"
    async with compat.deadline(600) as timeout:
        compat.reschedule(timeout, 900)
        await asyncio.sleep(0)
    assert _timers_holding(loop, request) == 1, "compat.deadline's timers hold none of it"
    live.cancel()
    with pytest.raises(TimeoutError):
        async with compat.deadline(0.01):
            await asyncio.sleep(1)


async def test_asyncpg_connections_open_in_a_context_of_their_own() -> None:
    """SQLAlchemy's asyncpg adapter still takes ``async_creator_fn`` in place of
    ``asyncpg.connect`` (what ``db.py`` gives it), and ``connect_apart`` runs the
    connect in an empty context, with the arguments it was given."""
    from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi

    assert 'kw.pop("async_creator_fn"' in inspect.getsource(AsyncAdapt_asyncpg_dbapi.connect)
    seen: list[object] = []

    async def connect(*args: object, **kwargs: object) -> object:
        seen.append(_REQUEST.get(None))
        return (args, kwargs)

    _REQUEST.set(object())
    got = await compat.connect_apart(connect)("dsn", timeout=5)
    assert got == (("dsn",), {"timeout": 5}) and seen == [None]


def test_redis_pools_make_their_connections_from_connection_class() -> None:
    """``redis_connections_apart`` replaces a redis-py asyncio pool's ``connection_class``:
    the pool must still make each connection from it, and a connection still open its
    socket through ``connect_check_health``."""
    from redis.asyncio import BlockingConnectionPool, Connection

    assert "self.connection_class(" in inspect.getsource(BlockingConnectionPool.make_connection)
    assert "connect_check_health" in inspect.getsource(Connection.connect)
    assert "connect_check_health" in inspect.getsource(Connection.send_packed_command)
    pool = BlockingConnectionPool.from_url("redis://127.0.0.1:1/0")
    compat.redis_connections_apart(pool)
    made = pool.make_connection()
    assert isinstance(made, Connection) and type(made).__name__ == "ConnectionApart"
