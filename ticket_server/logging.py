"""Logging to stderr only, one JSON object a line.

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
_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Send every log record of the process to stderr at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "fastmcp", "mcp"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    # SQLAlchemy echoes SQL at INFO; keep statements out of the logs unless asked for.
    logging.getLogger("sqlalchemy").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
