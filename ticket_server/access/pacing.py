"""Refusals answered at a pace: a client past its limit, or without a valid token, that
retries at once would otherwise have the event loop answer it as fast as it can send,
the other callers' requests waiting behind its refusals (issue 32). Each key's
refusals are answered ``per_second`` a second while at most ``HOLD_SECONDS`` worth of
them wait; a refusal beyond waits ``HOLD_SECONDS`` plus a random part of a second, so
a burst is not answered all at once. A held request costs a sleeping task, so a client
that waits for its answers before sending again (every HTTP client) sends at the pace
it is answered: ``per_second``, or with more requests in flight than fit in the hold,
about that many every ``HOLD_SECONDS`` (a bound on connections, not on refusals, is
what would hold such a client to ``per_second``)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from time import monotonic

HOLD_SECONDS = 3.0
"""The longest a refusal waits in turn (one beyond: up to a second more); within the
clients' usual read timeouts (httpx's 5 s) and uvicorn's graceful stop (10 s)."""
SWEEP_AT = 4096
"""Keys kept before those whose turn has passed are dropped."""


class RefusalPace:
    """Turns per key (``caller:NAME`` or ``address:IP``), ``1 / per_second`` seconds
    apart, in one process; ``per_second`` 0 answers every refusal at once."""

    def __init__(self, per_second: float, clock: Callable[[], float] = monotonic) -> None:
        self.interval = 1 / per_second if per_second > 0 else 0.0
        self.clock = clock
        self._next: dict[str, float] = {}  # key -> the earliest time of its next turn
        self._sweep_at = SWEEP_AT

    def reserve(self, key: str) -> float:
        """Seconds ``key``'s refusal is to wait (0 for the first in ``1 / per_second``
        seconds; past ``HOLD_SECONDS`` of turns, ``HOLD_SECONDS`` and up to a second)."""
        if not self.interval:
            return 0.0
        now = self.clock()
        wait = max(0.0, self._next.get(key, now) - now)
        if wait > HOLD_SECONDS:
            return HOLD_SECONDS + random.random()
        self._next[key] = now + wait + self.interval
        if len(self._next) > self._sweep_at:
            self._next = {k: t for k, t in self._next.items() if t > now}
            self._sweep_at = max(SWEEP_AT, 2 * len(self._next))
        return wait

    async def turn(self, key: str) -> float:
        """Wait for ``key``'s turn (``reserve``); the seconds waited."""
        wait = self.reserve(key)
        if wait:
            await asyncio.sleep(wait)
        return wait
