"""What makes a JSON-RPC 2.0 message unreadable, for both transports (JSON-RPC 2.0
sections 4-5; MCP has had no batches since 2025-06-18): invalid JSON is a Parse error
(-32700); valid JSON that is not one request, notification or response is an Invalid
Request (-32600). Both are answered with ``"id": null``, since no id could be read."""

from __future__ import annotations

import json
from typing import Any

PARSE_ERROR = "Parse error: the message is not valid JSON"
NOT_A_MESSAGE = "expected a JSON-RPC 2.0 request, notification or response object"
NULL_ID = "a request id must be a string or an integer"


def problem(message: Any) -> str | None:
    """Why the parsed ``message`` is not one JSON-RPC 2.0 message, or None."""
    if isinstance(message, list):
        return "JSON-RPC batches are not supported; send one message per request"
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return 'expected one JSON-RPC object with "jsonrpc": "2.0"'
    if not {"method", "result", "error"} & message.keys():
        return "expected a request, a notification or a response"
    request_id = message.get("id")
    if "method" in message and "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        return NULL_ID
    return None


def parse(raw: str | bytes) -> tuple[Any, str | None]:
    """(the parsed message, None) or (None, ``PARSE_ERROR``)."""
    try:
        return json.loads(raw), None
    except (ValueError, RecursionError):
        return None, PARSE_ERROR
