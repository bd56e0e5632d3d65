"""Stand-in HTTP MCP server for .ci/conformance/run.sh.

Shaped like the real ticket-server as far as the conformance suite can see:
one trivial tool, one resource, no prompts, and none of the suite's fixture
tools/prompts/resources (test_*, test://...). Used to build and test run.sh
until `ticket-server serve --transport http --port $PORT` exists.

Listens on 127.0.0.1:$PORT/mcp (PORT from the environment, default 8000).
The HTTP settings below are the ones the real server needs for the generic
conformance scenarios; see the comments on each.
"""

from __future__ import annotations

import os

from fastmcp import FastMCP

mcp = FastMCP("conformance-standin", version="0.0.0")


@mcp.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.resource("standin://manifest", mime_type="application/json")
def manifest() -> str:
    """A fixed JSON document, like tickets://manifest on the real server."""
    return '{"name": "conformance-standin"}'


def main() -> None:
    port = int(os.environ.get("PORT", "8000"))
    mcp.run(
        transport="http",
        host="127.0.0.1",
        port=port,
        path="/mcp",
        # Off by default in fastmcp 4.1.6; dns-rebinding-protection fails without it
        # (True = strict: every request's Host/Origin is validated).
        host_origin_protection=True,
        # The banner asks PyPI for a newer fastmcp: start-up delay offline.
        show_banner=False,
        log_level="WARNING",
    )


if __name__ == "__main__":
    main()
