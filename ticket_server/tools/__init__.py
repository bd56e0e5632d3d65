"""The MCP tools: thin, typed functions over the ticket domain."""

from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
"""Every current tool only reads the ticket database."""
