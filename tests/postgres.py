"""A private PostgreSQL server for the tests: started from the Debian binaries in a temp
directory on a free loopback port, or taken from TICKET_SERVER_TEST_POSTGRES_URL."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POSTGRES_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres_user(args: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; CI and the dev machines run tests as root.
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@dataclass
class PostgresServer:
    """``url(db)`` gives an asyncpg URL for database ``db`` on this server."""

    host: str
    port: int
    user: str
    data_dir: Path | None = None
    pg_ctl: Path | None = None
    _admin: _AdminConnection | None = field(default=None, repr=False)

    def admin(self, sql: str) -> None:
        """Run one statement on the ``postgres`` database over a connection kept open:
        each test's CREATE and DROP DATABASE, ~50 ms of psql process start saved each."""
        if self._admin is None:
            self._admin = _AdminConnection(self.host, self.port, self.user)
        self._admin.execute(sql)

    def url(self, database: str) -> str:
        return f"postgresql+asyncpg://{self.user}@{self.host}:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        proc = subprocess.run(
            [
                "psql",
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-U",
                self.user,
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-qAtc",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"psql failed: {proc.stderr}")
        return proc.stdout

    def stop(self) -> None:
        if self.data_dir is not None and self.pg_ctl is not None:
            subprocess.run(
                _as_postgres_user(
                    [str(self.pg_ctl), "-D", str(self.data_dir), "-m", "immediate", "stop"]
                ),
                capture_output=True,
                timeout=60,
            )

    def remove(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        self.stop()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    def start(self) -> None:
        assert self.data_dir is not None and self.pg_ctl is not None
        options = f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        subprocess.run(
            _as_postgres_user(
                [
                    str(self.pg_ctl),
                    "-D",
                    str(self.data_dir),
                    "-o",
                    options,
                    "-l",
                    str(self.data_dir / "server.log"),
                    "-w",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=60,
        )


class _AdminConnection:
    """One asyncpg connection on an event loop of its own thread, so it serves fixtures
    called from sync tests and from inside a running test loop alike."""

    def __init__(self, host: str, port: int, user: str) -> None:
        import asyncio
        import threading

        import asyncpg

        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self._conn: Any = self._run(
            asyncpg.connect(host=host, port=port, user=user, database="postgres")
        )

    def _run(self, coroutine: Any) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=60)

    def execute(self, sql: str) -> None:
        self._run(self._conn.execute(sql))

    def close(self) -> None:
        try:
            self._run(self._conn.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)


def start_private_server() -> PostgresServer:
    """initdb + pg_ctl start in a new temp directory (pytest's own is private to root,
    and the server runs as the postgres user); RuntimeError when not installed."""
    if not POSTGRES_BIN_DIRS or shutil.which("psql") is None:
        raise RuntimeError(
            "PostgreSQL is not installed: run `sudo bash .ci/install-services.sh` "
            "(Debian packages postgresql, postgresql-contrib, postgresql-client)"
        )
    bin_dir = POSTGRES_BIN_DIRS[0]
    root = Path(tempfile.mkdtemp(prefix="ticket-server-pg-"))
    data = root / "pgdata"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    subprocess.run(
        _as_postgres_user(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    server = PostgresServer("127.0.0.1", _free_port(), "postgres", data, bin_dir / "pg_ctl")
    server.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            server.psql("SELECT 1")
            return server
        except RuntimeError:
            time.sleep(0.2)
    raise RuntimeError("PostgreSQL did not start")


def postgres_for_tests() -> PostgresServer:
    """The server to test against. When none can be had the tests that need it fail
    (never skip): `make test` runs .ci/install-services.sh first."""
    url = os.environ.get("TICKET_SERVER_TEST_POSTGRES_URL")
    if url:
        from sqlalchemy.engine import make_url

        u = make_url(url)
        return PostgresServer(u.host or "127.0.0.1", u.port or 5432, u.username or "postgres")
    return start_private_server()


def server_at(url: str) -> tuple[PostgresServer, str]:
    """The server and database name of a PostgreSQL URL (as the `database_url` fixture gives)."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return PostgresServer(u.host or "127.0.0.1", u.port or 5432, u.username or "postgres"), str(
        u.database
    )


@contextmanager
def table_locked(url: str, table: str = "tickets") -> Iterator[None]:
    """Hold ACCESS EXCLUSIVE on ``table`` in an open transaction (a psql session of its
    own) until the block ends: every query on it waits, visibly, in pg_stat_activity."""
    server, database = server_at(url)
    session = subprocess.Popen(
        [
            "psql",
            "-h",
            server.host,
            "-p",
            str(server.port),
            "-U",
            server.user,
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-qAt",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert session.stdin is not None and session.stdout is not None
    try:
        session.stdin.write(
            f"BEGIN;\nLOCK TABLE {table} IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n"
        )
        session.stdin.flush()
        assert session.stdout.readline().strip() == "locked", (
            session.stderr.read() if session.stderr else ""
        )
        yield
    finally:
        if session.poll() is None:
            session.stdin.write("ROLLBACK;\n")
            session.stdin.close()
            session.wait(timeout=30)


def lock_waiters(url: str) -> int:
    """How many queries of this database wait on a lock right now (pg_stat_activity)."""
    server, database = server_at(url)
    return int(
        server.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            database,
        )
    )


def wait_for_lock_waiters(url: str, count: int, timeout: float = 30) -> None:
    """Return once at least ``count`` queries of this database wait on a lock: the event
    a test waits for instead of sleeping and hoping a call has reached the database."""
    deadline = time.monotonic() + timeout
    while (seen := lock_waiters(url)) < count:
        assert time.monotonic() < deadline, (
            f"{seen} of {count} queries waiting on the lock after {timeout} s"
        )
        time.sleep(0.02)
