"""Refusals answered at a pace: a client past its limit, or without a valid token, that
retries at once would otherwise have the event loop answer it as fast as it can send,
the other callers' requests waiting behind its refusals (issue 32). Each key's
refusals are answered at most ``per_second`` a second; one beyond waits its turn, at
most ``HOLD_SECONDS``. A held request costs a sleeping task, so a client that waits for
its answers before sending again (every HTTP client) sends at the pace it is answered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import monotonic

HOLD_SECONDS = 3.0
"""The longest a refusal is held: within the clients' usual read timeouts (httpx's 5 s)
and uvicorn's graceful stop (10 s)."""
SWEEP_AT = 4096
"""Keys kept before those whose turn has passed are dropped."""


class RefusalPace:
    """Turns per key (``caller:NAME`` or ``address:IP``), ``1 / per_second`` seconds
    apart; ``per_second`` 0 answers every refusal at once."""

    def __init__(self, per_second: float, clock: Callable[[], float] = monotonic) -> None:
        self.interval = 1 / per_second if per_second > 0 else 0.0
        self.clock = clock
        self._next: dict[str, float] = {}  # key -> the earliest time of its next turn

    def reserve(self, key: str) -> float:
        """Seconds ``key``'s refusal is to wait for its turn (0 for the first in
        ``1 / per_second`` seconds, at most ``HOLD_SECONDS``); the turn is taken."""
        if not self.interval:
            return 0.0
        now = self.clock()
        wait = min(max(0.0, self._next.get(key, now) - now), HOLD_SECONDS)
        self._next[key] = now + wait + self.interval
        if len(self._next) > SWEEP_AT:
            self._next = {k: t for k, t in self._next.items() if t > now}
        return wait

    async def turn(self, key: str) -> float:
        """Wait for ``key``'s turn (``reserve``); the seconds waited."""
        wait = self.reserve(key)
        if wait:
            await asyncio.sleep(wait)
        return wait
