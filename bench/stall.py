"""How long one request's body can hold the HTTP server's event loop: ``/healthz``
latency (polled from a thread, one request at a time) while single large tools/call
bodies are sent, beside the same poll on a quiet server. Run on its own:

    .venv/bin/python -m bench.stall [--repeat 3]

The server runs with ``TICKET_SERVER_MAX_REQUEST_BYTES`` at its highest (4 MiB), so
every body below is admitted by size and reaches the checks after the body read. Each
body is sent ``--repeat`` times; the figures are the worst /healthz answer while it was
served and the time the body took to be answered. Prints only; nothing is written."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.common import PYTHON, free_port, log, percentile, server_process, sqlite_url

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
TOOL = "get_ticket_status_v2"


def call_body(arguments: dict) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": arguments, "_meta": META},
        }
    ).encode()


def bodies() -> dict[str, bytes]:
    return {
        "normal call": call_body({"ticket_id": "SUP-4412"}),
        "300,000 keys (3.8 MB)": call_body({str(i): 0 for i in range(300_000)}),
        "20,000 keys (256 KiB)": call_body({str(i): 0 for i in range(20_000)}),
        "4,000 keys": call_body({str(i): 0 for i in range(4_000)}),
        "list of 1.2M zeros (3.6 MB)": call_body({"ticket_id": [0] * 1_200_000}),
        "one 4 MB string of commas": call_body({"ticket_id": "x," * 2_000_000}),
        "one 3 MB string of quotes": call_body({"ticket_id": '"' * 1_500_000}),
        "one 250 KB string of quotes": call_body({"ticket_id": '"' * 125_000}),
    }


def poll(url: str, until: threading.Event, out: list[float]) -> None:
    import httpx2 as httpx

    with httpx.Client(timeout=60) as http:
        while True:  # at least one answer, however soon the body is answered
            started = time.perf_counter()
            assert http.get(url).status_code == 200
            out.append(time.perf_counter() - started)
            if until.is_set():
                return


def run(repeat: int) -> None:
    import httpx2 as httpx

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "t.db"
        env = {
            "TICKET_SERVER_DATABASE_URL": sqlite_url(db),
            "FASTMCP_CHECK_FOR_UPDATES": "off",
            "TICKET_SERVER_MAX_REQUEST_BYTES": str(4 * 1024 * 1024),
            "TICKET_SERVER_HTTP_RATE_LIMIT": "100000/minute",
            "TICKET_SERVER_TOOL_RATE_LIMIT": "100000/minute",
        }
        exe = str(Path(PYTHON).parent / "ticket-server")
        full = {**os.environ, **env}
        subprocess.run([exe, "db", "upgrade"], env=full, check=True, capture_output=True)
        subprocess.run([exe, "db", "seed"], env=full, check=True, capture_output=True)
        token = subprocess.run(
            [exe, "callers", "add", "bench", "--scope", "tickets:read"],
            env=full,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        port = free_port()
        url, health = f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}/healthz"
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": TOOL,
        }
        with server_process([exe, "serve", "--transport", "http", "--port", str(port)], env, url):
            httpx.post(
                url, content=call_body({"ticket_id": "SUP-4412"}), headers=headers, timeout=60
            )
            quiet: list[float] = []
            done = threading.Event()
            threading.Timer(2.0, done.set).start()
            poll(health, done, quiet)
            log(
                f"quiet /healthz: p50 {percentile(quiet, 0.5) * 1000:.1f} ms, "
                f"p99 {percentile(quiet, 0.99) * 1000:.1f} ms, worst {max(quiet) * 1000:.1f} ms"
            )
            for name, body in bodies().items():
                worst, answered, status = [], [], 0
                for _ in range(repeat):
                    busy: list[float] = []
                    done = threading.Event()
                    poller = threading.Thread(target=poll, args=(health, done, busy))
                    poller.start()
                    time.sleep(0.2)  # the poller is under way before the body goes out
                    started = time.perf_counter()
                    status = httpx.post(url, content=body, headers=headers, timeout=60).status_code
                    answered.append(time.perf_counter() - started)
                    done.set()
                    poller.join()
                    worst.append(max(busy))
                log(
                    f"{name:28s} {len(body) / 1e6:5.2f} MB -> HTTP {status}: answered in "
                    f"{min(answered) * 1000:6.0f}-{max(answered) * 1000:.0f} ms; /healthz worst "
                    f"{min(worst) * 1000:6.1f}-{max(worst) * 1000:.1f} ms"
                )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.stall")
    p.add_argument("--repeat", type=int, default=3)
    run(p.parse_args().repeat)


if __name__ == "__main__":
    main()
