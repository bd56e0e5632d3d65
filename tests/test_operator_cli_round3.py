"""Issue 32's operator mistakes through the real command (C41, C42 and the 'Operators:'
items): each is one line on stderr naming the setting or command and the fix, exit
status 2, no traceback, nothing written. Each test spawns `.venv/bin/ticket-server` with
its own TICKET_SERVER_* environment (tests/test_operator_cli.py's `run`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.test_operator_cli import TICKET_SERVER, one_line, run, ticket_count, upgraded
from ticket_server.admin import CommandError
from ticket_server.admin.seeding import read_jsonl

SAMPLE = Path(__file__).resolve().parents[1] / "seed" / "tickets.jsonl"


# --- C41 -----------------------------------------------------------------------------------


def test_c41_jwt_mode_without_an_audience_is_one_line(tmp_path: Path) -> None:
    """C41: TICKET_SERVER_AUTH_MODE=jwt with issuer and key but no audience, then
    `serve --transport http`: one line naming TICKET_SERVER_JWT_AUDIENCE, exit status 2."""
    url = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    for audience in ({}, {"TICKET_SERVER_JWT_AUDIENCE": "  "}):
        line = one_line(
            run(
                url,
                "serve",
                "--transport",
                "http",
                TICKET_SERVER_AUTH_MODE="jwt",
                TICKET_SERVER_JWT_ISSUER="https://idp.example",
                TICKET_SERVER_JWT_PUBLIC_KEY="-----BEGIN PUBLIC KEY-----",
                **audience,
            )
        )
        assert "TICKET_SERVER_JWT_AUDIENCE" in line and "set it" in line, line


# --- C42 -----------------------------------------------------------------------------------

C42_LINES = [
    ('"status": "exploded"', "status", "new, open, in_progress"),
    ('"priority": "asap"', "priority", "low, normal, high, urgent"),
    ('"queue": null', "queue", "non-empty text"),
    ('"subject": null', "subject", "non-empty text"),
    ('"id": ""', "id", "non-empty text"),
]


def test_c42_seed_file_with_unusable_values_names_line_field_and_values(
    empty_database_url: str, tmp_path: Path
) -> None:
    """C42: `db seed --file` with lines holding "status":"exploded", "priority":"asap",
    "queue":null, "subject":null, "id":"": each one line naming the line number, the field
    and the allowed values, exit status 2, nothing written (the good line before it
    included). Each file is read by the command's own reader; one goes through the CLI."""
    upgraded(empty_database_url)
    first, second = (json.loads(line) for line in SAMPLE.read_text().splitlines()[:2])
    files = []
    for fragment, field, allowed in C42_LINES:
        bad = {**second, **json.loads("{" + fragment + "}")}
        path = tmp_path / f"{field}.jsonl"
        path.write_text(json.dumps(first) + "\n" + json.dumps(bad) + "\n")
        files.append((path, f"line 2 has {field} ", allowed))
    path = tmp_path / "twice.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(first) + "\n")
    files.append((path, "line 2 has id 'SUP-1000' again", "earlier line"))
    for path, named, allowed in files:
        with pytest.raises(CommandError) as refused:
            list(read_jsonl(path))
        message = str(refused.value)
        assert named in message and allowed in message, message
        assert message.startswith(f"db seed --file {path}") and "nothing was written" in message
    line = one_line(run(empty_database_url, "db", "seed", "--file", str(files[0][0])))
    assert 'line 2 has status "exploded"' in line and "new, open, in_progress" in line, line
    assert ticket_count(empty_database_url) == 0


# --- settings: SQLite URL slashes, misspelt variables ---------------------------------------


def test_sqlite_url_with_two_slashes_explains_three_and_four(tmp_path: Path) -> None:
    """`sqlite+aiosqlite://tmp/x.db` (two slashes): one line saying three slashes begin
    a relative path and four an absolute one, not a folder that does not exist."""
    for args in (["callers", "list"], ["serve", "--transport", "http"]):
        line = one_line(run("sqlite+aiosqlite://tmp/x.db", *args))
        assert "TICKET_SERVER_DATABASE_URL" in line and "two slashes" in line, line
        assert "sqlite+aiosqlite:///tmp/x.db" in line and "sqlite+aiosqlite:////tmp/x.db" in line
        assert "does not exist" not in line
    # A relative path whose folder is missing says it is relative, and where from.
    proc = subprocess.run(
        [TICKET_SERVER, "callers", "list"],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")},
            "TICKET_SERVER_DATABASE_URL": "sqlite+aiosqlite:///no-such-folder/x.db",
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = one_line(proc)
    assert "no-such-folder does not exist" in line and "relative path" in line, line
    assert str(tmp_path) in line and "four" in line


def test_a_misspelt_variable_is_refused_naming_the_setting(database_url: str) -> None:
    """A misspelt TICKET_SERVER_* variable (its setting would silently keep its default)
    is one line naming the setting meant; one that is like no setting is a warning."""
    line = one_line(run(database_url, "callers", "list", TICKET_SERVER_TOOL_RATE_LIMT="5/minute"))
    assert "TICKET_SERVER_TOOL_RATE_LIMT is not a setting" in line, line
    assert "did you mean TICKET_SERVER_TOOL_RATE_LIMIT?" in line
    line = one_line(
        run(database_url, "serve", "--transport", "http", ticket_server_jwt_audince="x")
    )
    assert "did you mean TICKET_SERVER_JWT_AUDIENCE?" in line, line
    done = run(database_url, "callers", "list", TICKET_SERVER_SOMETHING_ELSE="1")
    assert done.returncode == 0, done.stderr
    warnings = [json.loads(line) for line in done.stderr.splitlines() if "not a setting" in line]
    assert [w["level"] for w in warnings] == ["WARNING"], done.stderr
    assert "TICKET_SERVER_SOMETHING_ELSE is not a setting and is ignored" in warnings[0]["message"]


# --- a read-only SQLite file or folder ------------------------------------------------------


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` made unwritable for the commands this test spawns: the immutable flag
    (chattr +i) when the tests run as root, whom permission bits do not stop; else chmod."""
    if os.geteuid() == 0:
        assert shutil.which("chattr"), "chattr (e2fsprogs) is needed to test as root"
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        return
    mode = path.stat().st_mode
    path.chmod(mode & ~0o222)
    try:
        yield
    finally:
        path.chmod(mode)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_database_says_so(db_path: Path, tmp_path: Path, what: str) -> None:
    """A read-only SQLite file (or its folder, where SQLite keeps -wal and -shm) is one
    line naming the file or folder and "read-only" for `serve` and for the commands that
    write, not "unable to open database file; check that it runs"."""
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "tickets.db"
    shutil.copy(db_path, path)
    url = f"sqlite+aiosqlite:///{path}"
    commands = [
        ["serve", "--transport", "http"],
        ["callers", "add", "zed", "--scope", "tickets:read"],
    ]
    if what == "file":
        commands += [["serve"], ["db", "seed", "--count", "1"], ["audit", "prune"]]
    with read_only(path if what == "file" else folder):
        for args in commands:
            line = one_line(run(url, *args))
            shown = str(path) if what == "file" else f"folder {folder}"
            assert "TICKET_SERVER_DATABASE_URL" in line and shown in line, (args, line)
            assert "read-only" in line and "writable" in line and "check that it runs" not in line


# --- commands: tools export, probe, audit prune, help ---------------------------------------


def test_tools_export_for_an_unknown_caller_names_the_option(database_url: str) -> None:
    line = one_line(run(database_url, "tools", "export", "--caller", "nobody"))
    assert "tools export --caller nobody" in line and "no caller named 'nobody'" in line, line
    assert "TICKET_SERVER_STDIO_CALLER" not in line and "callers list" in line


def test_tools_export_without_a_database_says_so_in_one_line(tmp_path: Path) -> None:
    """Without --caller the export lists the tools as the stdio caller sees them, which
    the callers table says: a database that cannot be read is one line naming the
    setting, exit 2 (it was an ERROR log with a whole traceback, then the read tools)."""
    missing = f"sqlite+aiosqlite:///{tmp_path / 'absent' / 't.db'}"
    line = one_line(run(missing, "tools", "export"))
    assert "tools export: TICKET_SERVER_DATABASE_URL" in line and "does not exist" in line, line
    unmigrated = one_line(run(f"sqlite+aiosqlite:///{tmp_path / 't.db'}", "tools", "export"))
    assert "tools export:" in unmigrated and "db upgrade" in unmigrated, unmigrated


@pytest.mark.parametrize("target", ["127.0.0.1:8000/mcp", "localhost:8000", "localhost/mcp"])
def test_probe_without_a_scheme_says_write_http(tmp_path: Path, target: str) -> None:
    """`probe 127.0.0.1:8000/mcp` (no scheme) names the URL to write; it spawns nothing."""
    line = one_line(run(f"sqlite+aiosqlite:///{tmp_path / 't.db'}", "probe", target))
    assert f"has no scheme; write http://{target}" in line and "`--`" in line, line


def spawn_into_a_closed_pipe(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command with stdout a pipe whose reader is gone (`... | head` once head has
    exited): its first write fails with EPIPE."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
        environment.update(TICKET_SERVER_DATABASE_URL=database_url, TICKET_SERVER_LOG_LEVEL="ERROR")
        return subprocess.run(
            [TICKET_SERVER, *args],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(writer)


@pytest.mark.parametrize(
    "args",
    [
        ["tools", "export", "--format", "mcp"],
        ["callers", "list"],
        ["probe", "--json", "--timeout", "90", "--", TICKET_SERVER, "serve"],
    ],
)
def test_output_into_a_closed_pipe_ends_quietly(db_path: Path, args: list[str]) -> None:
    """`probe ... | head`, `tools export | head`: the reader gone ends the command
    quietly, as SIGPIPE ends other commands (status 141), without a BrokenPipe traceback."""
    done = spawn_into_a_closed_pipe(f"sqlite+aiosqlite:///{db_path}", *args)
    assert done.returncode == 141, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_client_tools_help_shows_a_percent_sign() -> None:
    done = subprocess.run(
        [TICKET_SERVER, "client", "tools", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "+-25 % for JSON" in done.stdout, done.stdout
    assert "%%" not in done.stdout


# --- Redis at start-up ----------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_unreachable_redis_is_said_at_start(tmp_path: Path, transport: str) -> None:
    """An unreachable rate-limit storage is one line at `serve`, naming the setting (and
    never the URL, which may hold a password), not an ERROR at the first call."""
    args = ["serve", "--transport", transport]
    line = one_line(
        run(
            f"sqlite+aiosqlite:///{tmp_path / 't.db'}",
            *args,
            TICKET_SERVER_RATE_LIMIT_STORAGE_URL="redis://:hunter2@127.0.0.1:1/0",
        )
    )
    assert "TICKET_SERVER_RATE_LIMIT_STORAGE_URL" in line and "does not answer" in line, line
    assert "hunter2" not in line and "memory://" in line


def test_seed_file_not_utf8_names_the_line(tmp_path: Path) -> None:
    """`db seed --file` with a Latin-1 byte on line 3 (a review's finding) said "line 0"
    (or whichever line ended the last 8 KiB read): the file is decoded line by line, so
    the line named is the one holding the byte."""
    first, second = SAMPLE.read_text().splitlines()[:2]
    path = tmp_path / "latin.jsonl"
    path.write_bytes((first + "\n" + second + "\n").encode() + b'{"subject": "caf\xe9"}\n')
    with pytest.raises(CommandError) as refused:
        list(read_jsonl(path))
    assert "line 3 " in str(refused.value) and "utf-8" in str(refused.value), refused.value
