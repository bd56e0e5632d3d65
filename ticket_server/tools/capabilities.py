"""The capabilities this server advertises, the same over `initialize` and
`server/discover`.

The server's tools, resources and prompts are fixed once it is built and it never
sends a `notifications/*/list_changed`; `server/discover` (2026-07-28) says
`listChanged: false`, but the SDK's handshake-era `initialize` takes FastMCP's default
of true. The low-level server's notification options are the one place both read.
"""

from __future__ import annotations

from fastmcp import FastMCP
from mcp.server.lowlevel.server import NotificationOptions


def register(mcp: FastMCP) -> None:
    """Advertise ``listChanged: false`` for tools, resources and prompts on both handshakes."""
    mcp._mcp_server.notification_options = NotificationOptions(
        prompts_changed=False, resources_changed=False, tools_changed=False,
    )
