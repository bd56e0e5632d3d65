"""What one caller may have under way at once, on every transport: at most
``concurrency`` requests running (tool calls, resource reads, prompts), so one caller's
slow requests cannot hold every database connection and worker thread, and at most
``share`` of them doing expensive work (``ToolPolicy.expensive``, every write, every
resource read), the rest waiting their turn. A turn is waited for rather than refused:
a refusal the client retries at once costs the server as much again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class CallerBudget:
    def __init__(self, concurrency: int = 8, share: int = 2) -> None:
        self.concurrency, self.share = concurrency, share
        self._running: dict[str, int] = {}
        self._turns: dict[str, asyncio.Semaphore] = {}

    def busy(self, caller: str) -> bool:
        """Whether ``caller`` already has ``concurrency`` requests running."""
        return self._running.get(caller, 0) >= self.concurrency

    @contextmanager
    def running(self, caller: str) -> Iterator[None]:
        """One more request of ``caller`` running while the block runs."""
        self._running[caller] = self._running.get(caller, 0) + 1
        try:
            yield
        finally:
            self._running[caller] -= 1
            if not self._running[caller]:
                del self._running[caller]

    def turn(self, caller: str) -> asyncio.Semaphore:
        """``caller``'s turns at expensive work (``async with``)."""
        return self._turns.setdefault(caller, asyncio.Semaphore(self.share))

    def refusal(self, what: str) -> str:
        """The words of a refusal for a caller that is ``busy`` (``what``: calls, requests)."""
        return (
            f"This caller already has {self.concurrency} {what} running; nothing was done. "
            "Wait for one to finish, then retry."
        )
