"""Filling a page to a byte bound: the one rule behind a search page's hits and a full
read's comments (each page's JSON stays within 16 KiB)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
D = TypeVar("D")


def fill(
    items: Iterable[T],
    dump: Callable[[T], D],
    size: Callable[[D], int],
    room: int,
    cut: Callable[[T, int], D] | None = None,
) -> list[D]:
    """The leading ``items``, each as ``dump(item)``, while their sizes (``size``, in
    bytes, plus one each for the comma between them) add up to at most ``room``. The
    first item always comes: as it is, or as ``cut(item, room)`` when it does not fit
    and ``cut`` is given."""
    page: list[D] = []
    used = 0
    for item in items:
        dumped = dump(item)
        needed = size(dumped) + 1
        if used + needed > room:
            if page:
                break
            if cut is not None:
                dumped = cut(item, room)
                needed = size(dumped) + 1
        page.append(dumped)
        used += needed
    return page
