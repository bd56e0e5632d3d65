"""The start-up checks of `ticket-server serve` over stdio, run beside the start.

Nothing is served before two checks pass: the database is at the code's migration head
(Alembic), and the configured stdio caller exists unrevoked (the callers table). Both
need SQLAlchemy and Alembic: about 0.3 s of imports, and Alembic would stay resident
(about 10 MB) after one look at a revision. So they run in a child process forked at
start, on another core, while the server imports FastMCP and answers initialize;
tools/list and tools/call wait for the verdict. The child's caller lookup is handed to
the server's callers cache, so the first tools/list needs no query either. A failed
check ends the server with its one-line message and exit status 2, as before.
Without ``os.fork`` (Windows) the checks run in-process when first awaited.
"""

from __future__ import annotations

import asyncio
import os
import pickle
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ticket_server.access.callers import generation
from ticket_server.settings import Settings


class CheckFailed(Exception):
    """A start-up check failed; the message (one line) says what to fix."""


@dataclass(frozen=True)
class Verdict:
    """The checks passed: the stdio caller's name and the callers cache they filled
    (``CallerCache.export``)."""

    caller: str
    lookups: dict[Hashable, tuple[float, Any]]


async def run_checks(settings: Settings) -> Verdict:
    """Both checks, here and now; ``CheckFailed`` names the first that fails."""
    from ticket_server.access.callers import open_store
    from ticket_server.access.local import IdentityError, check_stdio_identity
    from ticket_server.db import DatabaseSetupError, require_current_schema

    try:
        await require_current_schema(settings)
    except DatabaseSetupError as exc:
        raise CheckFailed(str(exc)) from exc
    store = open_store(settings)
    try:
        caller = await check_stdio_identity(settings, store)
    except IdentityError as exc:
        raise CheckFailed(str(exc)) from exc
    finally:
        await store.aclose()
    return Verdict(caller, store.cache.export())


def _child(settings: Settings, out: int) -> None:
    """In the forked child: run the checks, write the pickled outcome, leave at once
    (``os._exit``: nothing of the parent's, e.g. its buffers, runs here)."""
    status = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)  # stdin and stdout are the server's JSON-RPC channel
        os.dup2(devnull, 1)
        # stderr too: the verdict reaches the server through the pipe, and a child that
        # outlives a killed server must not keep the host waiting for stderr to close.
        os.dup2(devnull, 2)
        try:
            outcome: Verdict | CheckFailed = asyncio.run(run_checks(settings))
        except CheckFailed as exc:
            outcome = exc
        except Exception as exc:  # noqa: BLE001 - reported by the server, one line
            outcome = CheckFailed(f"the start-up checks failed: {type(exc).__name__}: {exc}".splitlines()[0])
        with os.fdopen(out, "wb") as pipe:
            pickle.dump(outcome, pipe)
    except BaseException:  # the server has gone (broken pipe) or the child was interrupted
        status = 1
    finally:
        os._exit(status)


class StartupChecks:
    """The checks for one ``serve``: ``start()`` as early as possible (before any thread
    or event loop: it forks), then ``await verdict()`` anywhere, any number of times."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._pid: int | None = None
        self._pipe: int | None = None
        self._task: asyncio.Future[Verdict] | None = None
        self.generation = generation()  # of the callers table, for the verdict's lookups

    def start(self) -> None:
        if not hasattr(os, "fork"):
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _child(self._settings, write)
        os.close(write)
        self._pid, self._pipe = pid, read

    def verdict(self) -> asyncio.Future[Verdict]:
        """The verdict (``CheckFailed`` when a check failed), awaited once for everyone."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._receive())
        return self._task

    async def _receive(self) -> Verdict:
        if self._pipe is None:
            return await run_checks(self._settings)
        outcome = await asyncio.to_thread(self._read_child)
        if isinstance(outcome, CheckFailed):
            raise outcome
        if not isinstance(outcome, Verdict):
            raise CheckFailed("the start-up checks ended without a verdict")
        return outcome

    def _read_child(self) -> object:
        assert self._pipe is not None and self._pid is not None
        with os.fdopen(self._pipe, "rb") as pipe:
            data = pipe.read()
        os.waitpid(self._pid, 0)
        return pickle.loads(data) if data else None
