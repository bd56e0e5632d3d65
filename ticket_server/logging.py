"""Logging to stderr only, one JSON object a line (or, with ``log_format=text``, one
readable line with the same fields).

Under stdio, stdout carries JSON-RPC frames and nothing else, so no handler here ever
writes to stdout. FastMCP's own handlers are switched off (``FASTMCP_LOG_ENABLED``,
set in ``ticket_server/__init__.py`` before fastmcp is imported) and its records
propagate to the root logger configured here; uvicorn's too (``log_config=None``).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else was passed via ``extra=`` and is logged.
# uvicorn adds `color_message` (the message with ANSI colours) to its records: not for JSON.
_RESERVED = set(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_extras(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    """What was passed via ``extra=``: every attribute a bare LogRecord lacks."""
    return {k: v for k, v in vars(record).items() if k not in _RESERVED and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...``: the same fields as the JSON lines,
    each extra as ``key=<JSON value>``, the traceback on the lines after."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        head, sep, trace = text.partition("\n")
        fields = " ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=str)}"
            for k, v in _extras(record).items()
        )
        return (f"{head} {fields}" if fields else head) + sep + trace


class DropQueryStrings(logging.Filter):
    """uvicorn's access log writes the request target with its query string; a client
    may put a secret there (``?access_token=...``, never accepted, but still sent).
    The path is logged, the query string is not."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) >= 3
            and isinstance(args[2], str)
            and "?" in args[2]
        ):
            record.args = (*args[:2], args[2].split("?", 1)[0] + "?[query omitted]", *args[3:])
        return True


class FixableWithoutTraceback(logging.Filter):
    """FastMCP logs every failed resource read and prompt with its traceback, at the
    error's own level: INFO for a missing ticket or a bad argument (C24), which the
    client fixes and an operator need not read a traceback for. Below WARNING the
    traceback is left out (the error's class and message are kept, as ``error``), and
    the message, which holds the client's URI or name whole, is cut to ``LIMIT``."""

    LIMIT = 300

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.error = f"{type(exc).__name__}: {exc}"[: self.LIMIT]
            record.exc_info = record.exc_text = None
        message = record.getMessage()
        if len(message) > self.LIMIT:
            record.msg, record.args = message[: self.LIMIT] + "...", ()
        return True


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Send every log record of the process to stderr at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "fastmcp", "mcp"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    fastmcp_server = logging.getLogger("fastmcp.server.server")
    if not any(isinstance(f, FixableWithoutTraceback) for f in fastmcp_server.filters):
        fastmcp_server.addFilter(FixableWithoutTraceback())
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, DropQueryStrings) for f in access.filters):
        access.addFilter(DropQueryStrings())
    # SQLAlchemy echoes SQL at INFO; keep statements out of the logs unless asked for.
    logging.getLogger("sqlalchemy").setLevel(max(logging.WARNING, root.level))
    # aiosqlite logs every statement with its parameters at DEBUG (token hashes among
    # them); query parameters are never logged, at any level.
    logging.getLogger("aiosqlite").setLevel(max(logging.INFO, root.level))
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
