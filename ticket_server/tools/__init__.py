"""The MCP tools: thin, typed functions over the ticket domain."""

from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
"""Every current tool only reads the ticket database (a closed world). The spec gives
destructiveHint and idempotentHint meaning only when readOnlyHint is false, so they
are left out of every tools/list."""
