"""Attachments: upload (add_internal_note with one file) and read (resources/read of
tickets://attachment/{id}) of a 1 MB and a 10 MB file over stdio, on SQLite and
PostgreSQL, with the server's peak resident memory growth during each transfer
(VmHWM after the transfer less VmRSS before it, the peak reset through
/proc/PID/clear_refs), and get_ticket_status_v2 in the same run as the baseline. Each
transfer runs in a server of its own, warmed by one small upload and read, so memory the
allocator kept from an earlier transfer neither hides nor adds to the next one's. Each
upload is a new content (a CSV whose first line differs), so every one stores its
bytes. Target: peak growth at most 3x the file size. The bare FastMCP server
(``bench/bare_server.py --files``: a tool that decodes a base64 argument, a resource
template that answers bytes) is measured the same way first: the floor the stdio
transport and FastMCP's own encoding set before this server stores or reads anything.

Each growth is given twice: for the first transfer of its size in the server, and for a
transfer after one of the same size (another file's upload and read): a server that has
served files of a size before, whose engine cache and heaps hold what one such transfer
left, as a running server's do. The first figure carries those one-time costs.

    .venv/bin/python -m bench.attachments [--engine sqlite|postgresql|both] [--runs 5]

For PostgreSQL, BENCH_PG_PORT picks the private cluster's port (bench.common.Postgres).
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.calls import UNLIMITED
from bench.coldstart import _read_response, _send, list_tools, stop
from bench.common import PYTHON, ROOT, log, percentile, sqlite_copy, sqlite_url

SIZES = {"1 MB": 1_000_000, "10 MB": 10_000_000}
TICKET = "SUP-4412"


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key}")


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux 4.0+)


def _content(size: int, n: int) -> bytes:
    head = f"run,{n},{time.time_ns()}\n".encode()
    row = b"user@example.com,Example User,3,ok\n"
    body = row * ((size - len(head)) // len(row) + 1)
    return (head + body)[:size]


class Server:
    """A server spawned over stdio: ours on the database at ``url``, or (``url`` None)
    the bare FastMCP server with its file tool and resource (``bench/bare_server.py
    --files``)."""

    def __init__(self, url: str | None) -> None:
        env = {
            **os.environ,
            "TICKET_SERVER_TOOL_RATE_LIMIT": UNLIMITED,
            "TICKET_SERVER_WRITE_RATE_LIMIT": UNLIMITED,
            "TICKET_SERVER_STDIO_CALLER": "bench",
            "TICKET_SERVER_TOOL_TIMEOUT": "120",
            "TICKET_SERVER_ATTACHMENT_MAX_BYTES": str(20_000_000),
            "TICKET_SERVER_ATTACHMENT_TICKET_MAX_BYTES": str(10**12),
            "FASTMCP_CHECK_FOR_UPDATES": "off",
        }
        if url is None:
            command = [PYTHON, "bench/bare_server.py", "--files"]
        else:
            command = [str(Path(PYTHON).parent / "ticket-server"), "serve"]
            env["TICKET_SERVER_DATABASE_URL"] = url
        self.bare = url is None
        self.proc = subprocess.Popen(
            command,
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        list_tools(self.proc)
        self.id = 10

    def call(self, method: str, params: dict) -> dict:
        self.id += 1
        _send(self.proc, {"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        answer = _read_response(self.proc, self.id)
        assert "result" in answer, answer
        return answer["result"]

    def measured(self, method: str, params: dict) -> tuple[dict, float, int]:
        """The result, milliseconds, and peak RSS growth in bytes."""
        time.sleep(0.3)  # the audit writer's flush of the previous call
        _reset_peak(self.proc.pid)
        before = _status(self.proc.pid, "VmRSS")
        start = time.perf_counter()
        result = self.call(method, params)
        elapsed = (time.perf_counter() - start) * 1000
        return result, elapsed, _status(self.proc.pid, "VmHWM") - before

    def upload(self, data: bytes, note: str, measure: bool = False) -> tuple[str, float, int]:
        """Upload ``data``: (the URI to read it back, milliseconds, peak RSS growth)."""
        encoded = base64.b64encode(data).decode()
        if self.bare:
            params: dict = {"name": "take_file", "arguments": {"content_base64": encoded}}
        else:
            attachment = {"name": "bench.csv", "content_base64": encoded}
            arguments = {"ticket_id": TICKET, "note": note, "attachments": [attachment]}
            params = {"name": "add_internal_note", "arguments": arguments}
        del encoded
        if measure:
            result, ms, grown = self.measured("tools/call", params)
        else:
            result, ms, grown = self.call("tools/call", params), 0.0, 0
        del params
        assert not result.get("isError"), str(result)[:500]
        if self.bare:
            return f"file://bytes/{len(data)}", ms, grown
        return (
            f"tickets://attachment/{result['structuredContent']['attachments'][0]['id']}",
            ms,
            grown,
        )


def _add_caller(url: str) -> None:
    import asyncio

    from ticket_server.access.callers import open_store
    from ticket_server.settings import Settings

    async def add() -> None:
        from ticket_server.access.callers import CallerError

        store = open_store(Settings(database_url=url))
        try:
            await store.add("bench", ["tickets:read", "tickets:write"])
        except CallerError:  # a data set copied from one another benchmark gave it
            pass
        await store.aclose()

    asyncio.run(add())


@contextmanager
def _warm(url: str | None, size: int = 1000) -> Iterator[Server]:
    """A server that has made one upload and read of ``size`` bytes (small by default:
    what the first of each loads, puremagic and the write path, is not a transfer's
    cost)."""
    server = Server(url)
    try:
        data = _content(size, -1 - time.monotonic_ns() % 10**9)  # a new content each time
        uri, _, _ = server.upload(data, "warm-up")
        server.call("resources/read", {"uri": uri})
        yield server
    finally:
        stop(server.proc, 30)


def _run(url: str | None, engine: str, runs: int) -> None:
    """``url`` None: the bare FastMCP server."""
    if url is not None:
        _add_caller(url)
        with _warm(url) as server:
            status = [
                server.measured(
                    "tools/call",
                    {"name": "get_ticket_status_v2", "arguments": {"ticket_id": TICKET}},
                )[1]
                for _ in range(20)
            ]
        log(
            f"{engine:<11} get_ticket_status_v2 (baseline): p50 {percentile(status, 0.5):.1f} "
            f"ms, p95 {percentile(status, 0.95):.1f} ms over {len(status)} calls"
        )
    for label, size in SIZES.items():
        up_ms, up_rss, read_ms, read_rss = [], [], [], []
        up_after, read_after = [], []
        for n in range(runs):
            # Each transfer in a server of its own: memory the allocator kept from an
            # earlier transfer would otherwise hide part of the next one's, or add to it.
            for warm_size, ups, reads in ((1000, up_rss, read_rss), (size, up_after, read_after)):
                data = _content(size, n * 2 + (warm_size == size))
                with _warm(url, warm_size) as server:
                    uri, ms, grown = server.upload(data, f"bench {label} {n}", measure=True)
                ups.append(grown)
                with _warm(url, warm_size) as server:
                    read, read_time, read_grown = server.measured("resources/read", {"uri": uri})
                blob = base64.b64decode(read["contents"][0]["blob"])
                assert blob == data or (url is None and len(blob) == size), str(read)[:300]
                reads.append(read_grown)
                if warm_size != size:
                    up_ms.append(ms)
                    read_ms.append(read_time)
        for what, times, growth, after in (
            ("upload", up_ms, up_rss, up_after),
            ("read", read_ms, read_rss, read_after),
        ):
            log(
                f"{engine:<11} {what:<6} {label:>5}: p50 {percentile(times, 0.5):7.1f} ms, "
                f"p95 {percentile(times, 0.95):7.1f} ms; peak RSS growth max "
                f"{max(growth) / 1e6:6.1f} MB = {max(growth) / size:.2f}x the file "
                f"(the first of its size), {max(after) / size:.2f}x after one of its size "
                f"({runs} runs each, each in a fresh server)"
            )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.attachments")
    p.add_argument(
        "--engine",
        choices=["sqlite", "postgresql", "both", "bare"],
        default="both",
        help="both: SQLite and PostgreSQL; the bare FastMCP server runs with each choice",
    )
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--count", type=int, default=10_000, help="tickets in the data set")
    args = p.parse_args()
    log(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    _run(None, "bare", args.runs)
    if args.engine in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            db = sqlite_copy(args.count, Path(tmp) / "tickets.db")
            _run(sqlite_url(db), "sqlite", args.runs)
    if args.engine in ("postgresql", "both"):
        from bench.common import Postgres

        pg = Postgres()
        pg.start()
        try:
            _run(pg.copy(args.count, "bench_attachments"), "postgresql", args.runs)
        finally:
            pg.stop()
    log(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
