"""The query synonyms of ticket search (issue 37): groups of words and phrases that mean
the same in a support ticket, read from a TOML file of the shape of ``synonyms.toml``
beside this module (the default list; ``TICKET_SERVER_SEARCH_SYNONYMS`` names a
deployment's own). A query holding one entry of a group also finds the tickets holding
another (``analyzer.query_terms``); tickets are indexed as written, so a new list takes
effect when the server starts, with no reindex."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from ticket_server.tickets.analyzer import Phrase, phrase

DEFAULT_SYNONYMS = Path(__file__).with_name("synonyms.toml")

Synonyms = tuple[tuple[Phrase, ...], ...]


def synonym_groups(text: str) -> list[list[str]]:
    """The ``groups`` of a synonyms file's text: a list of lists of two or more strings.
    Raises ValueError with one sentence naming what is wrong (TOML syntax, a group
    that is not a list of strings, an entry with no word that is searched)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"it is not TOML ({exc})") from None
    groups = data.get("groups", [])
    if not isinstance(groups, list):
        raise ValueError("`groups` must be a list of lists of words and phrases")
    for n, group in enumerate(groups, 1):
        if not (isinstance(group, list) and all(isinstance(e, str) for e in group)):
            raise ValueError(f"group {n} must be a list of words and phrases (strings)")
        if len(group) < 2:
            raise ValueError(f"group {n} must list two entries or more")
        for entry in group:
            if phrase(entry) is None:
                raise ValueError(
                    f"{entry!r} (group {n}) holds no word that is searched (only stop words?)"
                )
    return groups


@cache
def load_synonyms(path: Path | None = None) -> Synonyms:
    """The analyzed groups of the synonyms file at ``path`` (None: the default list).
    Raises ValueError (``synonym_groups``) or OSError when it cannot be read."""
    groups = synonym_groups((path or DEFAULT_SYNONYMS).read_text("utf-8"))
    return tuple(tuple(p for e in group if (p := phrase(e)) is not None) for group in groups)
