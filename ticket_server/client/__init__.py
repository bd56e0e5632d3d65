"""A governed MCP client kit: configuration and envelopes, one owned session per
server, argument models from input schemas, a gatekeeper with an approval callback,
JSON-line audit, and model-provider adapters. Works with any MCP server."""

from ticket_server.client.config import (
    MOST_RESTRICTIVE,
    ConfigError,
    Envelope,
    KitConfig,
    ServerConfig,
    ToolConfig,
    load_config,
    parse_config,
)

__all__ = [
    "MOST_RESTRICTIVE",
    "ConfigError",
    "Envelope",
    "KitConfig",
    "ServerConfig",
    "ToolConfig",
    "load_config",
    "parse_config",
]
