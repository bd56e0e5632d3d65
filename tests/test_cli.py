"""The operator commands as an operator runs them (`ticket-server ...` processes), on
both engines where the command touches the database: callers add / list / rotate /
revoke, the one-time first caller of `make run` (`callers bootstrap`), the default
database path, LOG_FORMAT=text, and `serve --transport http` refusing an unmigrated
database and serving with `--workers N`."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client

from tests.transports.conftest import TICKET_SERVER, free_port, server_env, stop
from tests.transports.test_stdio import stdio_params
from ticket_server.transports.process import collector_paused


def cli(database_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TICKET_SERVER, *args],
        env=server_env(database_url, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def listed(database_url: str) -> dict[str, dict]:
    done = cli(database_url, "callers", "list", "--json")
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in map(json.loads, done.stdout.splitlines())}


async def answers_with(database_url: str, token: str) -> None:
    """A stdio server started with this token answers a tool call."""
    async with Client(
        stdio_params(database_url, TICKET_SERVER_TOKEN=token), mode="2026-07-28"
    ) as client:
        result = await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert result.is_error is False


def refused_at_start(database_url: str, token: str) -> bool:
    done = cli(database_url, "serve", TICKET_SERVER_TOKEN=token)
    return done.returncode == 2 and "TICKET_SERVER_TOKEN" in done.stderr and done.stdout == ""


async def test_callers_add_list_rotate_revoke(database_url: str) -> None:
    """Both engines (the callers table is in the ticket database): `add` prints the token
    alone on stdout; `list --json` shows exactly the callers with their scopes, queues
    and limits and never a token; `rotate` prints a new token, the old one is refused
    at start-up and the new one works; `revoke` makes the caller's token useless and
    `list` shows when."""
    added = cli(
        database_url,
        "callers",
        "add",
        "billing-bot",
        "--scope",
        "tickets:read",
        "--queue",
        "billing",
        "--tool-limit",
        "5/minute",
        "--http-limit",
        "50/minute",
    )
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert token.startswith("tks_") and added.stdout == token + "\n"

    before = listed(database_url)
    assert set(before) == {"billing-bot"}
    row = before["billing-bot"]
    assert (
        row["scopes"],
        row["queues"],
        row["tool_rate_limit"],
        row["http_rate_limit"],
        row["revoked_at"],
    ) == (["tickets:read"], ["billing"], "5/minute", "50/minute", None)
    table = cli(database_url, "callers", "list")
    assert table.returncode == 0 and "billing-bot" in table.stdout and "billing" in table.stdout
    assert token not in table.stdout + table.stderr and token not in json.dumps(before)

    rotated = cli(database_url, "callers", "rotate", "billing-bot")
    assert rotated.returncode == 0, rotated.stderr
    new_token = rotated.stdout.strip()
    assert new_token.startswith("tks_") and new_token != token
    assert refused_at_start(database_url, token), "the old token still works after rotate"
    await answers_with(database_url, new_token)
    assert listed(database_url)["billing-bot"]["revoked_at"] is None

    revoked = cli(database_url, "callers", "revoke", "billing-bot")
    assert revoked.returncode == 0, revoked.stderr
    assert refused_at_start(database_url, new_token), "a revoked caller's token still works"
    assert listed(database_url)["billing-bot"]["revoked_at"] is not None


def test_callers_bootstrap_creates_the_first_caller_once(database_url: str) -> None:
    """`make run`'s `callers bootstrap`, both engines: on a database without callers it
    creates `admin` (tickets:read, every queue) and prints how to connect, token
    included, on stderr (stdout stays empty); the second run creates nothing and prints
    no token; after `callers add` on a fresh database it also creates nothing."""
    first = cli(database_url, "callers", "bootstrap")
    assert first.returncode == 0 and first.stdout == "", first.stderr
    assert "Authorization: Bearer tks_" in first.stderr
    token = first.stderr.split("Authorization: Bearer ", 1)[1].split()[0]
    callers = listed(database_url)
    assert set(callers) == {"admin"}
    assert (callers["admin"]["scopes"], callers["admin"]["queues"]) == (["tickets:read"], None)

    again = cli(database_url, "callers", "bootstrap")
    assert again.returncode == 0 and again.stdout == ""
    assert "tks_" not in again.stderr and "callers exist already" in again.stderr
    assert set(listed(database_url)) == {"admin"}
    assert not refused_at_start(database_url, token), "the printed token is admin's"


@pytest.mark.sqlite_only
def test_default_database_path_is_in_the_user_data_directory(tmp_path: Path) -> None:
    """Without TICKET_SERVER_DATABASE_URL the database is
    $XDG_DATA_HOME/ticket-server/tickets.db (~/.local/share/... by default) and `db
    upgrade` + `db seed` create it there."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TICKET_SERVER_") and k != "XDG_DATA_HOME"
    }
    env["HOME"] = str(tmp_path)
    for args in (["db", "upgrade"], ["db", "seed", "--if-empty"]):
        done = subprocess.run(
            [*TICKET_SERVER, *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    database = tmp_path / ".local" / "share" / "ticket-server" / "tickets.db"
    assert database.is_file() and database.stat().st_size > 100_000
    assert sorted(p.name for p in tmp_path.rglob("*.db")) == ["tickets.db"]


@pytest.mark.sqlite_only
def test_log_format_text(db_path: Path) -> None:
    """TICKET_SERVER_LOG_FORMAT=text: stderr lines are `time LEVEL logger: message
    key=value ...` (every field kept), not JSON; stdout under stdio still carries nothing
    but frames (here: none)."""
    done = subprocess.run(
        [*TICKET_SERVER, "serve"],
        env=server_env(db_path, TICKET_SERVER_LOG_FORMAT="text"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert any(
        " INFO ticket_server.transports.stdio: serving MCP over stdio " in line
        and 'caller="local"' in line
        for line in lines
    ), lines
    for line in lines:
        with pytest.raises(ValueError):
            json.loads(line)


def test_http_refuses_an_unmigrated_database(empty_database_url: str) -> None:
    """`serve --transport http` on a database without the schema, both engines: exits
    non-zero before listening, one line on stderr naming `ticket-server db upgrade`."""
    port = free_port()
    done = subprocess.run(
        [*TICKET_SERVER, "serve", "--transport", "http", "--port", str(port)],
        env=server_env(empty_database_url),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stdout == ""
    err = done.stderr.strip()
    assert "ticket-server db upgrade" in err and len(err.splitlines()) == 1, err
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


def _children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return children


def test_workers_n_serves_from_n_processes(db_path: Path, tmp_path: Path) -> None:
    """`serve --transport http --workers 2`: two worker processes under the supervisor,
    and a legacy client (served stateless, as --workers implies) gets its calls
    answered whichever worker takes each request."""
    from tests.transports.conftest import add_caller

    token = add_caller(db_path, "tester")
    port = free_port()
    stderr = tmp_path / "workers.stderr"
    process = subprocess.Popen(
        [*TICKET_SERVER, "serve", "--transport", "http", "--port", str(port), "--workers", "2"],
        env=server_env(db_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("wb"),
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, stderr.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.1)
        # uvicorn's supervisor spawns the workers with multiprocessing (beside them it may
        # run multiprocessing's resource tracker, which is not a worker).
        commands = [Path(f"/proc/{c}/cmdline").read_bytes() for c in _children(process.pid)]
        assert sum(b"spawn_main" in command for command in commands) == 2, commands

        import asyncio

        from mcp.client.streamable_http import streamable_http_client

        async def calls() -> list[bool]:
            transport = streamable_http_client(
                f"http://127.0.0.1:{port}/mcp",
                http_client=httpx.AsyncClient(
                    headers={"Authorization": f"Bearer {token}"}, timeout=30
                ),
            )
            async with Client(transport, mode="legacy") as client:
                return [
                    (
                        await client.call_tool("get_ticket_status_v2", {"ticket_id": "SUP-4412"})
                    ).is_error
                    for _ in range(10)
                ]

        assert asyncio.run(calls()) == [False] * 10
        assert (
            "serving MCP over Streamable HTTP" in stderr.read_text()
            and "2 workers" in stderr.read_text()
        )
    finally:
        stop(process)


def test_collector_paused_resumes_collection_and_freezes_what_start_up_made() -> None:
    """The stdio start-up runs without the cyclic garbage collector; afterwards it collects
    again, even when start-up failed, and what start-up made is out of its passes."""
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with pytest.raises(RuntimeError, match="start-up failed"), collector_paused():
            assert not gc.isenabled()
            made = [[] for _ in range(1000)]
            raise RuntimeError("start-up failed")
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)
    finally:
        gc.unfreeze()


def test_the_http_app_a_server_runs_is_built_frozen(db_path: Path) -> None:
    """``serve --transport http`` and each of its workers build the app with the collector
    paused and what they built frozen: left in the collector's care, those objects made
    every full collection while serving a pause of the event loop."""
    script = (
        "import gc, sys\n"
        "from ticket_server.settings import Settings\n"
        "from ticket_server.transports.http import serving_app\n"
        "before = gc.get_freeze_count()\n"
        "serving_app(Settings())\n"
        "print(before, gc.get_freeze_count(), gc.isenabled(), len(gc.get_objects()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=server_env(db_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    before, frozen, enabled, tracked = done.stdout.split()
    assert int(before) == 0 and enabled == "True"
    # Everything the imports and the runtime made is out of the collector's passes.
    assert int(frozen) > 50_000 and int(tracked) < int(frozen) // 10
