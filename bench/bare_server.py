"""The bare FastMCP server every benchmark compares against: one trivial tool that
returns a small Pydantic model, no middleware, no database, FastMCP defaults.

    python bench/bare_server.py                 # stdio (banner off)
    python bench/bare_server.py --http PORT     # Streamable HTTP at /mcp (FastMCP defaults)
    python bench/bare_server.py --files         # stdio, with a file upload tool and read

Only fastmcp and pydantic are imported: this is the floor a FastMCP server stands on.
``--files`` adds what bench/attachments.py measures ours against: a tool that takes a
file as base64 and decodes it, and a resource template that answers a file of the bytes
asked (the bytes made once, then FastMCP's own encoding), with nothing stored.
"""

from __future__ import annotations

import base64
import sys

from fastmcp import FastMCP
from pydantic import BaseModel


class Status(BaseModel):
    id: str
    status: str
    owner: str | None
    updated: str


def build_bare(*, files: bool = False) -> FastMCP:
    mcp = FastMCP("bare")

    @mcp.tool
    def get_status(ticket_id: str) -> Status:
        """Status of one ticket."""
        return Status(id=ticket_id, status="open", owner="r.mehta", updated="2026-11-30T09:00:00Z")

    if files:

        @mcp.tool
        def take_file(content_base64: str) -> int:
            """Decode one file sent as base64; its size in bytes."""
            return len(base64.b64decode(content_base64, validate=True))

        @mcp.resource("file://bytes/{size}", mime_type="application/octet-stream")
        def give_file(size: int) -> bytes:
            """A file of ``size`` bytes."""
            return b"x" * size

    return mcp


def main(argv: list[str]) -> None:
    mcp = build_bare(files="--files" in argv)
    if len(argv) >= 2 and argv[0] == "--http":
        mcp.run(
            transport="http",
            host="127.0.0.1",
            port=int(argv[1]),
            show_banner=False,
            uvicorn_config={"log_level": "warning"},
        )
    else:
        mcp.run(transport="stdio", show_banner=False)


if __name__ == "__main__":
    main(sys.argv[1:])
