"""Shared pieces of the benchmarks: the machine, statistics, cached data sets, and the
private PostgreSQL cluster (all under .cache/bench/, gitignored, reused between runs)."""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
PYTHON = sys.executable
PG_BIN = Path(os.environ.get("BENCH_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_PORT = int(os.environ.get("BENCH_PG_PORT", "55731"))


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: list[float]) -> float:
    return statistics.median(values)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine() -> dict[str, str]:
    from importlib.metadata import version

    import fastmcp
    import mcp  # noqa: F401

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "fastmcp": fastmcp.__version__,
        "mcp": version("mcp"),
        "sqlalchemy": version("sqlalchemy"),
        "sqlite": __import__("sqlite3").sqlite_version,
    }


# --- data sets ---------------------------------------------------------------------


def seed_database(url: str, count: int | None) -> None:
    """Migrate the empty database at ``url`` and seed ``count`` generated tickets (None:
    the sample in seed/)."""
    from ticket_server import db
    from ticket_server.admin.seeding import seed
    from ticket_server.settings import Settings

    db.upgrade(url)
    t = time.perf_counter()
    asyncio.run(seed(Settings(database_url=url), count=count, progress=True))
    what = "the sample" if count is None else f"{count:,} tickets"
    log(f"seeded {what} in {time.perf_counter() - t:.1f} s ({url.split('/')[-1]})")


def sqlite_dataset(count: int) -> Path:
    """A migrated SQLite file with ``count`` generated tickets, made once per schema
    revision and reused: a data set of an older revision is copied and upgraded (as a
    deployment's database is), else one is generated."""
    from ticket_server import db
    from ticket_server.migrations import HEAD

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"sqlite-{count}-{HEAD}.db"
    if path.exists():
        return path
    tmp = path.with_suffix(".partial")
    for p in CACHE.glob(tmp.name + "*"):
        p.unlink()
    older = sorted(CACHE.glob(f"sqlite-{count}-0*.db"))
    if older:
        t = time.perf_counter()
        shutil.copy(older[-1], tmp)
        db.upgrade(sqlite_url(tmp))
        log(f"upgraded {older[-1].name} to {HEAD} in {time.perf_counter() - t:.1f} s")
    else:
        seed_database(sqlite_url(tmp), count)
    import sqlite3

    con = sqlite3.connect(tmp)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("ANALYZE")
    con.close()
    for suffix in ("-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    tmp.rename(path)
    return path


def sqlite_copy(count: int, dest: Path) -> Path:
    """A private copy of the cached data set (benchmarks that write, e.g. audit rows)."""
    shutil.copy(sqlite_dataset(count), dest)
    return dest


class Postgres:
    """A private PostgreSQL 15 cluster in .cache/bench/pg (trust auth, loopback only).

    ``durable``: a second cluster (.cache/bench/pg-durable, port ``BENCH_PG_PORT`` + 1)
    with PostgreSQL's default durability (fsync, synchronous commit, full-page writes), as
    a deployment runs it; the default cluster turns them off, which only speeds up loading
    data sets but leaves a write's time all CPU.
    """

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        self.dir = CACHE / ("pg-durable" if durable else "pg")
        self.port = PG_PORT + 1 if durable else PG_PORT
        self.url_base = f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}"
        self.started = False

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = list(args)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True)

    def available(self) -> bool:
        return (PG_BIN / "postgres").exists()

    def start(self) -> None:
        CACHE.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            for p in (ROOT / ".cache", CACHE):
                os.chmod(p, 0o755)
        if not (self.dir / "PG_VERSION").exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.dir, "postgres", "postgres")
            self._run(str(PG_BIN / "initdb"), "-D", str(self.dir), "-A", "trust", "-U", "postgres")
        if (
            self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.dir), "status", check=False).returncode
            == 0
        ):
            return
        fast = (
            ""
            if self.durable
            else "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        )
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c shared_buffers=1GB "
            f"{fast}-c max_wal_size=4GB -c maintenance_work_mem=512MB -c work_mem=32MB"
        )
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.dir),
            "-o",
            opts,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )
        self.started = True

    def stop(self) -> None:
        if self.started:
            self._run(
                str(PG_BIN / "pg_ctl"), "-D", str(self.dir), "-m", "fast", "stop", check=False
            )
            self.started = False

    def psql(self, sql: str, db: str = "postgres") -> str:
        return self._run(
            str(PG_BIN / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            db,
            "-Atc",
            sql,
        ).stdout

    def dataset(self, count: int) -> str:
        """The URL of a database with ``count`` generated tickets, made once per schema
        revision and reused."""
        from ticket_server import db
        from ticket_server.migrations import HEAD

        name = f"tickets_{count}_{HEAD}".lower()
        if self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}_ok'").strip() == "1":
            return f"{self.url_base}/{name}"
        older = sorted(
            self.psql(
                f"SELECT left(datname, -3) FROM pg_database WHERE datname LIKE "
                f"'tickets\\_{count}\\_0%\\_ok'"
            ).split()
        )
        if older:  # copied and upgraded, as a deployment's database is
            t = time.perf_counter()
            self.psql(f"DROP DATABASE IF EXISTS {name}")
            self.psql(f"CREATE DATABASE {name} TEMPLATE {older[-1]}")
            url = f"{self.url_base}/{name}"
            db.upgrade(url)
            log(f"upgraded {older[-1]} to {HEAD} in {time.perf_counter() - t:.1f} s")
        else:
            url = self.empty(name)
            seed_database(url, count)
        self.psql("VACUUM ANALYZE", db=name)
        self.psql(f"CREATE DATABASE {name}_ok")  # marker: the data set is complete
        return url

    def empty(self, name: str) -> str:
        """The URL of database ``name``, made afresh and empty."""
        self.psql(f"DROP DATABASE IF EXISTS {name}")
        self.psql(f"CREATE DATABASE {name}")
        return f"{self.url_base}/{name}"

    def copy(self, count: int, name: str) -> str:
        """The URL of database ``name``, made afresh as a copy of the ``count`` data set
        (benchmarks that write: the cached one stays as generated)."""
        source = self.dataset(count).rsplit("/", 1)[1]
        self.psql(f"DROP DATABASE IF EXISTS {name}")
        self.psql(f"CREATE DATABASE {name} TEMPLATE {source}")
        return f"{self.url_base}/{name}"


@contextmanager
def engines_ready(engines: Iterable[str], part: str) -> Iterator[list[tuple[str, Postgres | None]]]:
    """The engines a benchmark part runs on, each with the PostgreSQL cluster (started
    here, stopped when the block ends; None for SQLite). PostgreSQL is left out, with a
    line, when its binaries are missing."""
    wanted = list(engines)
    pg = Postgres() if "postgresql" in wanted else None
    if pg is not None and not pg.available():
        log(f"{part}: PostgreSQL binaries not found; skipped")
        pg = None
    try:
        if pg is not None:
            pg.start()
        yield [(engine, pg) for engine in wanted if engine != "postgresql" or pg is not None]
    finally:
        if pg is not None:
            pg.stop()


@contextmanager
def server_process(
    cmd: list[str],
    env: dict[str, str] | None = None,
    ready_url: str | None = None,
    timeout: float = 30.0,
):
    """Run a server subprocess (stderr discarded) until the block ends."""
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        if ready_url:
            _wait_port(ready_url, proc, timeout)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_port(url: str, proc: subprocess.Popen, timeout: float) -> None:
    from urllib.parse import urlparse

    u = urlparse(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.args}")
        try:
            with socket.create_connection((u.hostname, u.port), 0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"server did not listen on {url}")
