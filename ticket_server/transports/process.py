"""What a serving process does for itself once, over stdio and over HTTP: it builds what
it keeps with Python's cyclic garbage collector paused, then freezes what it built out of
the collector's passes."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block without Python's cyclic garbage collector, then freeze what it made
    out of the collector's later passes (``gc.freeze``) and collect again as before.

    The imports and the runtime make a great many objects that live as long as the
    process, and almost no garbage cycles. Left in the collector's care, each full
    collection walks all of them again: during start-up, which a stdio client waits for at
    every session, and then while serving, where each full collection stops the event
    loop for as long as the walk takes (bench/ANALYSIS.md, "Full collections while
    serving HTTP")."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
