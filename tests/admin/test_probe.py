"""`ticket-server probe`, run as a user runs it (a subprocess), against our server over
stdio and HTTP in both revisions, against a legacy-only server, and against servers
that are absent, refuse, vanish or never answer: the probe always ends, non-zero with
one line on stderr when it could not do its job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import sqlite_url
from tests.transports.conftest import TICKET_SERVER, free_port

LEGACY_SERVER = [sys.executable, str(Path(__file__).parents[1] / "clients" / "legacy_server.py")]


def probe(
    *args: str, db_path: Path | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKET_SERVER_")}
    if db_path is not None:  # for a stdio server spawned by the probe (it inherits this env)
        env["TICKET_SERVER_DATABASE_URL"] = sqlite_url(db_path)
        env["TICKET_SERVER_LOG_LEVEL"] = "WARNING"
    else:
        env["TICKET_SERVER_DATABASE_URL"] = "sqlite+aiosqlite:///:memory:"
    return subprocess.run(
        [*TICKET_SERVER, "probe", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ticket-server probe: ")
    return lines[0]


def check_our_server(report: dict, handshake: str, revision: str) -> None:
    assert report["handshake"] == handshake
    assert report["protocol_version"] == revision
    assert report["server"]["name"] == "ticket-server"
    assert report["server"]["version"]
    assert "ticket database" in report["instructions"]
    assert "tools" in report["capabilities"]
    tools = {t["name"]: t for t in report["tools"]}
    assert tools["get_ticket_status"]["deprecated"] is True
    assert tools["get_ticket_status"]["replacement"] == "get_ticket_status_v2"
    assert tools["get_ticket_status"]["sunset"]
    assert tools["get_ticket_status_v2"]["deprecated"] is False
    assert tools["get_ticket_status_v2"]["status"] == "current"


def test_probe_stdio_discovers_and_calls(db_path: Path) -> None:
    done = probe(
        "--json",
        "--timeout",
        "60",
        "--call",
        "get_ticket_status_v2",
        "--args",
        '{"ticket_id": "SUP-4412"}',
        "--",
        *TICKET_SERVER,
        "serve",
        db_path=db_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["transport"] == "stdio"
    check_our_server(report, "server/discover", "2026-07-28")
    assert report["call"]["is_error"] is False
    assert report["call"]["structured_content"]["id"] == "SUP-4412"


def test_probe_stdio_text_trace(db_path: Path) -> None:
    done = probe("--timeout", "60", "--", *TICKET_SERVER, "serve", db_path=db_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    fields = {line.split(None, 1)[0]: line for line in lines if line and not line.startswith(" ")}
    assert fields["handshake"].split()[-1] == "server/discover"
    assert fields["protocol"].split()[-1] == "2026-07-28"
    assert fields["server"].split()[1] == "ticket-server"
    assert any(line.split()[:2] == ["get_ticket_status", "DEPRECATED,"] for line in lines)
    assert any(line.split() == ["get_ticket_status_v2", "current"] for line in lines)


@pytest.mark.parametrize(
    ("mode", "handshake", "revision"),
    [("auto", "server/discover", "2026-07-28"), ("legacy", "initialize", "2025-11-25")],
)
def test_probe_http_both_revisions(http_server, mode: str, handshake: str, revision: str) -> None:
    done = probe(
        http_server.url,
        "--token",
        http_server.token,
        "--mode",
        mode,
        "--json",
        "--call",
        "search_tickets_v2",
        "--args",
        '{"query": "invoice", "limit": 2}',
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["transport"] == "streamable-http"
    check_our_server(report, handshake, revision)
    assert report["call"]["is_error"] is False


def test_c16_probe_pinned_to_2026_07_28_shows_what_server_discover_returned(http_server) -> None:
    """C16: `probe URL --token T --mode 2026-07-28` prints the server's name, version,
    capabilities and instructions from `server/discover`, as JSON and as text."""
    done = probe(http_server.url, "--token", http_server.token, "--mode", "2026-07-28", "--json")
    assert done.returncode == 0, done.stderr
    check_our_server(json.loads(done.stdout), "server/discover", "2026-07-28")
    text = probe(http_server.url, "--token", http_server.token, "--mode", "2026-07-28")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    fields = {line.split(None, 1)[0]: line for line in lines if line and not line.startswith(" ")}
    assert fields["handshake"].split()[1] == "server/discover"
    assert fields["server"].split()[1] == "ticket-server" and len(fields["server"].split()) >= 3
    assert "tools" in fields["capabilities"]
    assert any("ticket database" in line for line in lines if line.startswith("  "))


def test_probe_reports_initialize_for_a_legacy_only_server() -> None:
    done = probe("--json", "--call", "echo", "--args", '{"text": "hi"}', "--", *LEGACY_SERVER)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["handshake"] == "initialize"
    assert report["protocol_version"] == "2025-11-25"
    assert report["server"] == {"name": "legacy-only", "version": "9.9.9"}
    assert report["instructions"] == "A server from before server/discover."
    assert {t["name"]: t["deprecated"] for t in report["tools"]} == {
        "echo": False,
        "old_echo": True,
    }
    assert report["call"]["text"] == "hi"

    text = probe("--", *LEGACY_SERVER)
    assert text.returncode == 0, text.stderr
    assert "handshake         initialize" in text.stdout.splitlines()


def test_probe_tool_error_exits_1(http_server) -> None:
    done = probe(
        http_server.url,
        "--token",
        http_server.token,
        "--call",
        "get_ticket_status_v2",
        "--args",
        '{"ticket_id": "SUP-0000000"}',
    )
    assert done.returncode == 1
    assert "isError  true" in done.stdout
    assert "SUP-0000000" in done.stdout


def test_probe_unauthorised(http_server) -> None:
    line = one_line_error(probe(http_server.url))
    assert "unauthorised (HTTP 401)" in line
    line = one_line_error(probe(http_server.url, "--token", "not-a-token"))
    assert "unauthorised (HTTP 401)" in line


def test_probe_refused() -> None:
    line = one_line_error(probe(f"http://127.0.0.1:{free_port()}/mcp", "--timeout", "10"))
    assert "refused" in line


def test_probe_wrong_path(http_server) -> None:
    line = one_line_error(probe(f"{http_server.base}/not-mcp", "--token", http_server.token))
    assert "404" in line


def test_probe_times_out_on_a_silent_server() -> None:
    silent = [sys.executable, "-c", "import time; time.sleep(120)"]
    line = one_line_error(probe("--timeout", "1", "--", *silent, timeout=60))
    assert "timed out after 1 s" in line


def test_probe_server_gone() -> None:
    dying = [
        sys.executable,
        "-c",
        "import sys; print('no database here', file=sys.stderr); sys.exit(4)",
    ]
    line = one_line_error(probe("--timeout", "20", "--", *dying))
    assert "went away" in line and "no database here" in line


def test_probe_command_not_found() -> None:
    line = one_line_error(probe("--", "/nonexistent/ticket-server"))
    assert "cannot start the server" in line


def test_probe_usage_errors() -> None:
    done = probe("--args", "{}", "http://127.0.0.1:1/mcp")
    assert done.returncode == 2 and "--args needs --call" in done.stderr
    done = probe("--call", "x", "--args", "[1]", "http://127.0.0.1:1/mcp")
    assert done.returncode == 2 and "JSON object" in done.stderr


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf"])
def test_probe_refuses_a_timeout_that_is_no_deadline(seconds: str) -> None:
    """`--timeout 0` or a negative one (a review's finding) ended in a pydantic traceback
    (exit status 1); it is a usage error now, one line naming --timeout, exit status 2."""
    done = probe("--timeout", seconds, "http://127.0.0.1:1/mcp")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--timeout" in done.stderr


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/mcp", "ws://127.0.0.1:8000/mcp", "HTTP://x"])
def test_probe_names_a_url_it_cannot_speak_to(target: str) -> None:
    """A URL of another scheme (a review's finding) was run as a stdio command: "cannot
    start the server: No such file or directory", exit status 3. It is a usage error
    naming the schemes the probe speaks."""
    done = probe(target, "--timeout", "1")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "http://" in done.stderr and target in done.stderr
