"""A governed MCP client kit: configuration and envelopes, one owned session per
server, argument models from input schemas, a gatekeeper with an approval callback,
JSON-line audit, and model-provider adapters. Works with any MCP server."""

from ticket_server.client.audit import Audit, json_lines, turn
from ticket_server.client.config import (
    MOST_RESTRICTIVE,
    ConfigError,
    Envelope,
    KitConfig,
    ServerConfig,
    ToolConfig,
    load_config,
    parse_config,
    parse_mcp_servers,
)
from ticket_server.client.kit import ApprovalRequest, CallRefused, Kit, ToolFailed, ask_on_terminal
from ticket_server.client.session import (
    CallTimeout,
    Handshake,
    KitError,
    ServerSession,
    ServerUnavailable,
)
from ticket_server.client.survey import CheckReport, ServerCheck
from ticket_server.client.tools import InvalidArguments, ToolDefinition

__all__ = [
    "MOST_RESTRICTIVE",
    "ApprovalRequest",
    "Audit",
    "CallRefused",
    "CallTimeout",
    "CheckReport",
    "ConfigError",
    "Envelope",
    "Handshake",
    "InvalidArguments",
    "Kit",
    "KitConfig",
    "KitError",
    "ServerCheck",
    "ServerConfig",
    "ServerSession",
    "ServerUnavailable",
    "ToolConfig",
    "ToolDefinition",
    "ToolFailed",
    "ask_on_terminal",
    "json_lines",
    "load_config",
    "parse_config",
    "parse_mcp_servers",
    "turn",
]
