"""What makes a JSON-RPC 2.0 message unreadable, for both transports (JSON-RPC 2.0
sections 4-5; MCP has had no batches since 2025-06-18): invalid JSON is a Parse error
(-32700); valid JSON that is not one request, notification or response is an Invalid
Request (-32600). Both are answered with ``"id": null``, since no id could be read."""

from __future__ import annotations

import json
from typing import Any

PARSE_ERROR = "Parse error: the message is not valid JSON"
TOO_DEEP = (
    "Parse error: the message nests arrays or objects more deeply than this server reads "
    "(no MCP message nests so deep)"
)
"""A message nested past the parser's depth, which may well be valid JSON: Python's
``json`` stops at its recursion limit (about 1,000 levels), pydantic-core at 200."""
NOT_UTF8 = "Parse error: the message is not UTF-8 (JSON text must be UTF-8, RFC 8259 section 8.1)"
NOT_A_MESSAGE = "expected a JSON-RPC 2.0 request, notification or response object"
NULL_ID = "a request id must be a string or an integer"
MAX_MESSAGE_TOKENS = 8192
"""Most JSON tokens one message may hold, as ``too_many_tokens`` counts them: a tools/call
at its arguments' bounds (``tools.errors.MAX_ARGUMENT_VALUES``) holds under half of it.
Parsing costs time per token on the event loop, where no thread helps: the JSON parsers
hold the GIL throughout."""
_STRUCTURE = b',[{"'


def problem(message: Any) -> str | None:
    """Why the parsed ``message`` is not one JSON-RPC 2.0 message, or None."""
    if isinstance(message, list):
        return "JSON-RPC batches are not supported; send one message per request"
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return 'expected one JSON-RPC object with "jsonrpc": "2.0"'
    if not {"method", "result", "error"} & message.keys():
        return "expected a request, a notification or a response"
    request_id = message.get("id")
    if (
        "method" in message
        and "id" in message
        and (isinstance(request_id, bool) or not isinstance(request_id, str | int))
    ):
        return NULL_ID
    return None


def too_many_tokens(body: bytes, limit: int = MAX_MESSAGE_TOKENS) -> bool:
    """Whether the JSON text ``body`` holds more than ``limit`` tokens, told without
    parsing it: a few passes of C byte operations over it, whatever it holds, where a
    parse builds an object per token.

    What is counted: the strings (keys included) and, outside them, the commas and the
    opening brackets: a part of the tokens, and no fewer than the values held less one
    (each member has its key, each array element but the first its comma). Escaped
    backslashes and quotes are removed first, so every quote left opens or closes a string. For text that is not JSON
    the count still covers the prefix a parser would read before failing."""
    if len(body) - len(body.translate(None, _STRUCTURE)) <= limit:  # a bound above the count
        return False
    text = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    strings = text.count(b'"') // 2
    if strings > limit:
        return True
    outside = b"".join(text.split(b'"')[::2])  # at most 2 * limit + 1 parts
    return strings + len(outside) - len(outside.translate(None, _STRUCTURE)) > limit


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def parse(raw: str | bytes) -> tuple[Any, str | None]:
    """(the parsed message, None) or (None, ``PARSE_ERROR``, ``TOO_DEEP`` or ``NOT_UTF8``). Bytes must
    be UTF-8 (RFC 8259 section 8.1): ``json.loads`` would also read UTF-16 and UTF-32,
    and ``NaN`` and ``Infinity``, which are not JSON (RFC 8259 section 6)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, NOT_UTF8
    try:
        return json.loads(raw, parse_constant=_not_json), None
    except RecursionError:
        return None, TOO_DEEP
    except ValueError:
        return None, PARSE_ERROR
