"""The operator's mistakes through the real command (C21, C05 a, issue 17 items 1-7): each
is one line on stderr naming the command or setting, what is wrong and what to do, exit
status 2, no traceback, and nothing written. Every test spawns `.venv/bin/ticket-server`
with its own TICKET_SERVER_* environment; the database-touching ones run on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ticket_server.db import open_repository, table_names
from ticket_server.settings import Settings

TICKET_SERVER = str(Path(sys.executable).parent / "ticket-server")  # the venv's console script


def run(
    database_url: str, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    environment.update(TICKET_SERVER_DATABASE_URL=database_url, **env)
    return subprocess.run(
        [TICKET_SERVER, *args],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a refused command (exit status 2, nothing on stdout)."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert lines[0].startswith("ticket-server")
    return lines[0]


def ticket_count(database_url: str) -> int:
    async def count() -> int:
        repo = open_repository(Settings(database_url=database_url))
        try:
            return await repo.count()
        finally:
            await repo.aclose()

    return asyncio.run(count())


def upgraded(database_url: str) -> str:
    assert run(database_url, "db", "upgrade").returncode == 0
    return database_url


# --- item 1, C21: seeding mistakes -------------------------------------------------------


def test_c21_seed_twice_names_the_ids_that_exist(database_url: str) -> None:
    """C21: `db seed` on a seeded database names the ids present and writes nothing."""
    before = ticket_count(database_url)
    line = one_line(run(database_url, "db", "seed"))
    assert "db seed" in line and "SUP-1000" in line and "exist already" in line, line
    assert "--if-empty" in line and "unavailable" not in line
    assert ticket_count(database_url) == before
    assert run(database_url, "db", "seed", "--if-empty").returncode == 0


def test_c21_seed_file_missing(database_url: str, tmp_path: Path) -> None:
    """C21: `db seed --file` of a missing file: file not found, nothing written."""
    before = ticket_count(database_url)
    line = one_line(run(database_url, "db", "seed", "--file", str(tmp_path / "missing.jsonl")))
    assert "missing.jsonl" in line and "No such file" in line, line
    assert ticket_count(database_url) == before


def test_c21_seed_line_without_created_at(empty_database_url: str, tmp_path: Path) -> None:
    """C21: a JSONL line without `created_at`: line N lacks created_at, nothing written
    (the lines before it included)."""
    upgraded(empty_database_url)
    sample = (
        (Path(__file__).resolve().parents[1] / "seed" / "tickets.jsonl").read_text().splitlines()
    )
    broken = sample[2].replace('"created_at"', '"opened_at"')
    path = tmp_path / "tickets.jsonl"
    path.write_text("\n".join([sample[0], sample[1], broken, sample[3]]) + "\n")
    line = one_line(run(empty_database_url, "db", "seed", "--file", str(path)))
    assert "line 3 lacks created_at" in line, line
    assert ticket_count(empty_database_url) == 0


# --- item 3: all or nothing ---------------------------------------------------------------


def _as_from_a_terminal() -> None:
    """In the child before exec: SIGINT handled by default and not blocked, as a shell
    starts a command, whatever disposition the test process passes on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def test_seed_interrupted_keeps_nothing_and_if_empty_then_seeds(empty_database_url: str) -> None:
    """Ctrl-C (SIGINT) during `db seed --count 100000`, after batches were written, leaves
    no ticket; a later `db seed --if-empty` therefore seeds."""
    upgraded(empty_database_url)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    environment.update(
        TICKET_SERVER_DATABASE_URL=empty_database_url, TICKET_SERVER_LOG_LEVEL="debug"
    )
    seeding = subprocess.Popen(
        [TICKET_SERVER, "db", "seed", "--count", "100000"],
        env=environment,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        assert seeding.stderr is not None
        for line in seeding.stderr:  # the seeder's DEBUG line after each written batch
            if '"written"' in line:
                break
        else:
            pytest.fail("no batch was written")
        seeding.send_signal(signal.SIGINT)
        read: list[str] = []
        reader = threading.Thread(target=lambda: read.append(seeding.stderr.read()), daemon=True)
        reader.start()
        reader.join(timeout=90)
        if reader.is_alive():  # say why, rather than wait for the test's timeout
            signals = [
                ln
                for ln in Path(f"/proc/{seeding.pid}/status").read_text().splitlines()
                if ln.startswith("Sig")
            ]
            pytest.fail(f"db seed still running 90 s after SIGINT; its signal masks: {signals}")
        assert seeding.wait(timeout=60) == 130
    finally:
        seeding.kill()
    rest = read[0]
    assert "Traceback" not in rest
    assert "interrupted; nothing was written" in rest
    assert ticket_count(empty_database_url) == 0
    assert run(empty_database_url, "db", "seed", "--if-empty", "--count", "50").returncode == 0
    assert ticket_count(empty_database_url) == 50


# --- item 4: destructive commands -----------------------------------------------------------


def test_downgrade_needs_a_revision_and_base_needs_yes(database_url: str) -> None:
    line = one_line(run(database_url, "db", "downgrade"))
    assert "revision" in line and "--help" in line, line
    line = one_line(run(database_url, "db", "downgrade", "base"))
    assert "drops every table" in line and "callers" in line and "audit_events" in line, line
    assert "--yes" in line
    assert ticket_count(database_url) > 0  # nothing dropped
    line = one_line(run(database_url, "db", "downgrade", "no-such-revision"))
    assert "no-such-revision" in line and "head" in line, line
    assert run(database_url, "db", "downgrade", "base", "--yes").returncode == 0
    assert asyncio.run(table_names(Settings(database_url=database_url))) in (
        [],
        ["alembic_version"],
    )


# --- item 1: settings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("TICKET_SERVER_DATABASE_URL", "/srv/tickets.db", "sqlite+aiosqlite:///PATH"),
        ("TICKET_SERVER_DATABASE_URL", "postgresql://tickets@db/tickets", "postgresql+asyncpg://"),
        ("TICKET_SERVER_DATABASE_URL", "sqlite:///tickets.db", "sqlite+aiosqlite:///tickets.db"),
        ("TICKET_SERVER_TOOL_RATE_LIMIT", "lots", "60/minute"),
        ("TICKET_SERVER_HTTP_RATE_LIMIT", "fast", "60/minute"),
        # A review's finding: the write limit was not checked (a traceback at start-up),
        # a limit of 0 refused every call, and a second limit after ';' was dropped.
        ("TICKET_SERVER_WRITE_RATE_LIMIT", "lots", "60/minute"),
        ("TICKET_SERVER_TOOL_RATE_LIMIT", "0/minute", "at least 1"),
        ("TICKET_SERVER_HTTP_RATE_LIMIT", "10/second;100/minute", "one limit"),
        # A review's finding: `serve --transport http` ended in a pydantic traceback.
        ("TICKET_SERVER_PUBLIC_URL", "tickets.example.com", "https://tickets.example.com"),
        ("TICKET_SERVER_RATE_LIMIT_STORAGE_URL", "memcached://h:1", "redis://HOST:PORT/DB"),
        # A review's finding: served, and every attachment then failed at its call.
        ("TICKET_SERVER_ATTACHMENT_STORE", "s3", "TICKET_SERVER_ATTACHMENT_S3_BUCKET"),
        ("TICKET_SERVER_AUTH_MODE", "jwt", "TICKET_SERVER_JWT_JWKS_URL"),
        ("TICKET_SERVER_ALLOWED_HOSTS", "host", "JSON list"),
        ("TICKET_SERVER_ALLOWED_ORIGINS", "http://localhost:6274", "JSON list"),
        ("TICKET_SERVER_RETIREMENT_DATES", "search_tickets=2027-06-30", "JSON object"),
        ("TICKET_SERVER_PORT", "eighty", "valid integer"),
        ("TICKET_SERVER_TOOLSETS", "[read", "read,respond,triage"),
        ("TICKET_SERVER_ATTACHMENT_TYPES", '["image/png"', "image/png,application/pdf"),
    ],
)
def test_c21_each_bad_setting_is_one_line(
    tmp_path: Path, variable: str, value: str, expected: str
) -> None:
    """C21's kind: a bad setting is one line naming the variable, the problem and the fix."""
    url, environment = f"sqlite+aiosqlite:///{tmp_path / 't.db'}", {variable: value}
    if variable == "TICKET_SERVER_DATABASE_URL":
        url, environment = value, {}
    for args in (["callers", "list"], ["serve", "--transport", "http"]):
        line = one_line(run(url, *args, **environment))
        assert variable in line and expected in line, line
    assert "tickets@db" not in line  # a URL (and its password) is never echoed


def test_list_settings_are_read_as_words_or_json() -> None:
    """The list settings an operator writes by hand take words separated by commas or
    spaces, as TICKET_SERVER_CONFIRM_WRITES always did, or a JSON list (a review found
    TICKET_SERVER_TOOLSETS=read,backlog refused in pydantic's words)."""
    for written in ("read,backlog", "read, backlog", "read backlog", '["read", "backlog"]'):
        assert Settings(toolsets=written).toolsets == ["read", "backlog"]
    kinds = "image/png,text/csv"
    assert Settings(attachment_types=kinds).attachment_types == ["image/png", "text/csv"]
    assert Settings(confirm_writes="none").confirm_writes == []
    assert Settings(confirm_writes="close_ticket").confirm_writes == ["close_ticket"]


def test_two_bad_settings_are_two_lines(tmp_path: Path) -> None:
    proc = run(
        f"sqlite+aiosqlite:///{tmp_path / 't.db'}",
        "callers",
        "list",
        TICKET_SERVER_LOG_FORMAT="xml",
        TICKET_SERVER_PORT="eighty",
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and {line.split(":")[1].strip().split("=")[0] for line in lines} == {
        "TICKET_SERVER_LOG_FORMAT",
        "TICKET_SERVER_PORT",
    }, lines


def test_log_level_in_any_case(database_url: str) -> None:
    proc = run(
        database_url,
        "callers",
        "list",
        TICKET_SERVER_LOG_LEVEL="debug",
        TICKET_SERVER_LOG_FORMAT="TEXT",
    )
    assert proc.returncode == 0, proc.stderr


# --- items 2 and 5: serve -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["setting", "flag"])
def test_serve_http_on_a_busy_port_is_one_line(db_path: Path, how: str) -> None:
    """Another process holds the port: one line naming it and how to pick another,
    and "serving" is never logged."""
    url = f"sqlite+aiosqlite:///{db_path}"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        if how == "setting":
            proc = run(url, "serve", "--transport", "http", TICKET_SERVER_PORT=str(port))
        else:
            proc = run(url, "serve", "--transport", "http", "--port", str(port))
    line = one_line(proc)
    assert (
        f"port {port}" in line
        and "in use" in line
        and "TICKET_SERVER_PORT" in line
        and "--port" in line
    )
    assert "serving" not in proc.stderr


@pytest.mark.parametrize("flags", [["--port", "9000"], ["--host", "0.0.0.0"], ["--workers", "2"]])
def test_serve_http_flags_without_http_are_refused(tmp_path: Path, flags: list[str]) -> None:
    """`serve --port/--host/--workers` without `--transport http` is refused (no stdio server
    starts silently ignoring them)."""
    line = one_line(run(f"sqlite+aiosqlite:///{tmp_path / 't.db'}", "serve", *flags))
    assert flags[0] in line and "--transport http" in line, line


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_serve_http_port_out_of_range_is_one_line(db_path: Path, port: str) -> None:
    """`serve --transport http --port 70000` (a review's finding) ended in a pydantic
    traceback and `--port -1` said the host could not be resolved; each is one line
    naming --port and its range, as TICKET_SERVER_PORT's value is."""
    url = f"sqlite+aiosqlite:///{db_path}"
    line = one_line(run(url, "serve", "--transport", "http", "--port", port))
    assert f"--port {port}" in line and "65535" in line, line


@pytest.mark.sqlite_only
def test_serve_stdio_with_a_token_and_a_caller_name_says_to_keep_one(db_path: Path) -> None:
    """TICKET_SERVER_TOKEN and TICKET_SERVER_STDIO_CALLER both set (a review's finding):
    the server ran as the token's caller and ignored the name without a word, so an
    operator who meant the name got another caller's scopes and queues. It is one line
    naming both settings."""
    url = upgraded(f"sqlite+aiosqlite:///{db_path}")
    token = run(url, "callers", "add", "billing", "--scope", "tickets:read").stdout.strip()
    assert run(url, "callers", "add", "admin", "--scope", "tickets:read").returncode == 0
    line = one_line(
        run(url, "serve", TICKET_SERVER_TOKEN=token, TICKET_SERVER_STDIO_CALLER="admin")
    )
    assert "TICKET_SERVER_TOKEN" in line and "TICKET_SERVER_STDIO_CALLER" in line, line
    assert token not in line


@pytest.mark.sqlite_only
def test_serve_stdio_as_a_revoked_local_caller_says_how_to_restore_it(db_path: Path) -> None:
    """A `local` row in the callers table stands for the built-in stdio caller; once
    revoked, `serve` said only "set TICKET_SERVER_TOKEN" (a review's finding): the line
    names the command that restores it, and the other setting too."""
    url = upgraded(f"sqlite+aiosqlite:///{db_path}")
    assert run(url, "callers", "add", "local", "--scope", "tickets:read").returncode == 0
    assert run(url, "callers", "revoke", "local").returncode == 0
    line = one_line(run(url, "serve"))
    assert "`ticket-server callers rotate local`" in line, line
    assert "TICKET_SERVER_STDIO_CALLER" in line and "TICKET_SERVER_TOKEN" in line, line


@pytest.mark.parametrize(
    ("args", "command"),
    [(["sla", "show", "--json"], "sla show"), (["callers", "list", "--all"], "callers list")],
)
def test_an_unknown_option_points_at_its_command_help(
    tmp_path: Path, args: list[str], command: str
) -> None:
    """An option a command does not take (a review's finding) pointed at the top-level
    `ticket-server --help`, which lists no command's options; it names the command's."""
    line = one_line(run(f"sqlite+aiosqlite:///{tmp_path / 't.db'}", *args))
    assert f"see `ticket-server {command} --help`" in line and args[-1] in line, line


def test_c05a_stdio_before_any_upgrade_says_run_db_upgrade(tmp_path: Path) -> None:
    """C05 (a), the default database: a stdio client config spawned before any `db upgrade`
    (no TICKET_SERVER_DATABASE_URL, no data folder yet) names the command, not a setting."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    environment.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.run(
        [TICKET_SERVER, "serve"],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = one_line(proc)
    assert "run `ticket-server db upgrade`" in line and "TICKET_SERVER_" not in line, line


# --- item 6: callers --------------------------------------------------------------------


def test_callers_add_refuses_unknown_scopes(database_url: str) -> None:
    line = one_line(run(database_url, "callers", "add", "admin2", "--scope", "tickets:admin"))
    assert "tickets:admin" in line and "tickets:read" in line and "tickets:write" in line, line
    listed = run(database_url, "callers", "list", "--json")
    assert listed.returncode == 0 and '"admin2"' not in listed.stdout


def test_confirmation_actions_in_any_case(database_url: str) -> None:
    """A confirmation action is a write's name in any case, as caller names and queues
    are (a review found `--confirm Assign_Ticket` and TICKET_SERVER_CONFIRM_WRITES=None
    refused): `callers add --confirm` and the setting store it in lower case."""
    added = run(
        database_url,
        *("callers", "add", "carol", "--scope", "tickets:read", "--scope", "tickets:write"),
        *("--confirm", "Assign_Ticket", "--confirm", " CLOSE_TICKET"),
    )
    assert added.returncode == 0, added.stderr
    scopes = ("--scope", "tickets:read", "--scope", "tickets:write")
    assert run(database_url, "callers", "add", "dan", *scopes, "--confirm", "None").returncode == 0
    rows = run(database_url, "callers", "list", "--json").stdout.splitlines()
    listed = {row["name"]: row["confirm_writes"] for row in map(json.loads, rows)}
    assert listed["carol"] == ["assign_ticket", "close_ticket"] and listed["dan"] == []
    line = one_line(run(database_url, "callers", "add", "eve", *scopes, "--confirm", "Assign"))
    assert "'assign'" in line and "assign_ticket" in line, line
    assert Settings(confirm_writes="Close_Ticket,NONE").confirm_writes == ["close_ticket"]
    assert Settings(confirm_writes='["Reply_To_Customer"]').confirm_writes == ["reply_to_customer"]


def test_toolsets_and_kind_in_any_case(database_url: str) -> None:
    """Toolset names and a caller's kind are taken in any case, as confirmation actions
    are (a review found `--toolset Read`, `--kind Assistant` and TICKET_SERVER_TOOLSETS=Read
    refused): `callers add` and the setting store them in lower case."""
    scopes = ("--scope", "tickets:read")
    added = run(
        database_url,
        *("callers", "add", "carol", *scopes, "--toolset", "Read", "--toolset", " BACKLOG"),
        *("--kind", "Assistant"),
    )
    assert added.returncode == 0, added.stderr
    rows = run(database_url, "callers", "list", "--json").stdout.splitlines()
    listed = {row["name"]: row for row in map(json.loads, rows)}
    assert listed["carol"]["toolsets"] == ["backlog", "read"], listed
    assert listed["carol"]["kind"] == "assistant", listed
    line = one_line(run(database_url, "callers", "add", "eve", *scopes, "--toolset", "Reads"))
    assert "'reads'" in line and "respond" in line, line
    line = one_line(run(database_url, "callers", "add", "eve", *scopes, "--kind", "Robot"))
    assert "'robot'" in line and "assistant" in line, line
    assert Settings(toolsets="Read, BACKLOG").toolsets == ["read", "backlog"]
    assert Settings(toolsets='["Triage"]').toolsets == ["triage"]
    assert Settings(attachment_types="Image/PNG").attachment_types == ["image/png"]


def test_a_revoked_caller_is_restored_by_rotate(database_url: str) -> None:
    assert run(database_url, "callers", "add", "bob", "--scope", "tickets:read").returncode == 0
    assert run(database_url, "callers", "revoke", "bob").returncode == 0
    line = one_line(run(database_url, "callers", "add", "bob", "--scope", "tickets:read"))
    assert "revoked" in line and "callers rotate bob" in line, line
    rotated = run(database_url, "callers", "rotate", "bob")
    assert rotated.returncode == 0 and "restored" in rotated.stderr
    token = rotated.stdout.strip()

    async def holder() -> str | None:
        from ticket_server.access.callers import open_store

        store = open_store(Settings(database_url=database_url))
        try:
            caller = await store.by_token(token)
            return caller.name if caller else None
        finally:
            await store.aclose()

    assert asyncio.run(holder()) == "bob"
    line = one_line(run(database_url, "callers", "rotate", "nobody"))
    assert "nobody" in line and "callers list" in line


async def test_known_scopes_are_the_scopes_tools_declare(server) -> None:
    """`callers add` accepts exactly the scopes some tool needs (KNOWN_SCOPES)."""
    from ticket_server.access.identity import KNOWN_SCOPES

    declared = {
        tag
        for tool in await server.list_tools(run_middleware=False)
        for tag in tool.tags
        if ":" in tag
    }
    assert declared == set(KNOWN_SCOPES)


@pytest.mark.parametrize(
    "args",
    [
        ["db", "upgrade"],
        ["db", "downgrade", "-1"],
        ["db", "seed"],
        ["callers", "list"],
        ["callers", "add", "bob", "--scope", "tickets:read"],
        ["audit"],
        ["report", "deprecated"],
        ["tools", "export", "--caller", "bob"],
        ["serve", "--transport", "http"],
    ],
)
def test_c05_every_command_on_a_database_that_does_not_answer(args: list[str]) -> None:
    """C05's kind: a database that refuses connections (nothing listens on port 1) is one
    line naming TICKET_SERVER_DATABASE_URL for every command; no logged traceback."""
    proc = run("postgresql+asyncpg://tickets@127.0.0.1:1/tickets", *args)
    line = one_line(proc)
    assert "TICKET_SERVER_DATABASE_URL" in line and "cannot open the database" in line, line


@pytest.mark.parametrize("args", [["callers", "list"], ["audit"], ["db", "seed"]])
def test_commands_before_db_upgrade_say_run_it(tmp_path: Path, args: list[str]) -> None:
    line = one_line(run(f"sqlite+aiosqlite:///{tmp_path / 'new.db'}", *args))
    assert "run `ticket-server db upgrade`" in line, line
