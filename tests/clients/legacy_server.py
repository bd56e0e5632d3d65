"""A legacy-only MCP server over stdio, written out by hand: it speaks the 2025-11-25
`initialize` handshake and answers `server/discover` (and anything else it does not
know) with JSON-RPC -32601, as every server from before the 2026-07-28 revision does.
Used by tests/admin/test_probe.py and tests/clients/test_inspector.py; run with `python legacy_server.py`."""

from __future__ import annotations

import json
import os
import sys

TOOLS = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "old_echo",
        "description": "DEPRECATED: use echo instead.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        "_meta": {
            "dev.ticket-server/deprecation": {
                "deprecated": True,
                "replacement": "echo",
                "sunset": "2027-01-31",
            }
        },
    },
]


if os.environ.get("LEGACY_SERVER_UNPORTABLE") == "1":
    # A bare `true` where a schema object belongs: legal JSON Schema that many clients
    # reject (the Inspector's --strict check calls it an error).
    TOOLS.append(
        {
            "name": "free_form",
            "description": "Anything.",
            "inputSchema": {"type": "object", "properties": {"data": True}},
        }
    )


def answer(request: dict) -> dict | None:
    method, rid = request.get("method"), request.get("id")
    if rid is None:  # a notification
        return None
    if method == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "legacy-only", "version": "9.9.9"},
            "instructions": "A server from before server/discover.",
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = request["params"]["arguments"]["text"]
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        }
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
