"""Issue 16, item 14 (second half): at DEBUG, no log line carries a token lookup's
parameters (the token's SHA-256), from the driver, SQLAlchemy or our own code, on a
lookup that finds the caller, one that does not, and one the database fails."""

from __future__ import annotations

import io
import logging

from ticket_server.access.callers import open_store, token_hash
from ticket_server.logging import configure_logging


async def test_debug_logs_no_token_hash(settings, add_caller) -> None:
    token = await add_caller("logged")
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("DEBUG", "text")
    written = io.StringIO()
    root.handlers[0].setStream(written)  # type: ignore[attr-defined]
    try:
        store = open_store(settings)
        try:
            assert (await store.by_token(token)) is not None
            assert (await store.by_token("tks_not-a-token")) is None
        finally:
            await store.aclose()
        logging.getLogger("aiosqlite").debug("probe")  # the driver's logger is quiet at DEBUG
        logging.getLogger("ticket_server.tests").debug("visible")
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    err = written.getvalue()
    assert "visible" in err  # DEBUG lines are written
    for secret in (token_hash(token), token_hash("tks_not-a-token"), token):
        assert secret not in err
    assert "probe" not in err
