"""ticket-server: an MCP server in front of a support-ticket database."""

import os
from importlib.metadata import PackageNotFoundError, version

# FastMCP installs its own (rich) log handlers at import time unless told not to; our
# logging is configured in ticket_server.logging, so switch theirs off before any import.
os.environ.setdefault("FASTMCP_LOG_ENABLED", "false")
# The banner and the update check go to the network and cost start-up time.
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

try:
    __version__ = version("ticket-server")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"
