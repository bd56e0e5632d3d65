"""The query synonyms of ticket search (issue 37): groups of words and phrases that mean
the same in a support ticket, read from a TOML file of the shape of ``synonyms.toml``
beside this module (the default list; ``TICKET_SERVER_SEARCH_SYNONYMS`` names a
deployment's own). A query holding one entry of a group also finds the tickets holding
another (``analyzer.query_terms``); tickets are indexed as written, so a new list takes
effect when the server process starts (it is read once per process), with no reindex."""

from __future__ import annotations

import logging
import tomllib
from functools import cache
from pathlib import Path

from ticket_server.tickets.analyzer import Phrase, Synonyms, phrase

log = logging.getLogger(__name__)

DEFAULT_SYNONYMS = Path(__file__).with_name("synonyms.toml")
MAX_ENTRIES = 10_000  # entries of a synonyms file (each query looks entries up by word)


def synonym_groups(text: str) -> list[list[Phrase]]:
    """The analyzed ``groups`` of a synonyms file's text: a list of lists of two or more
    strings, nothing else at the top. Raises ValueError with one sentence naming what is
    wrong (TOML syntax, another key, a group that is not a list of strings, an entry
    with no word that is searched, an entry written twice, too many entries)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"it is not TOML ({exc})") from None
    unknown = sorted(set(data) - {"groups"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}: the file holds `groups` only")
    groups = data.get("groups", [])
    if not isinstance(groups, list):
        raise ValueError("`groups` must be a list of lists of words and phrases")
    if sum(len(g) for g in groups if isinstance(g, list)) > MAX_ENTRIES:
        raise ValueError(f"it holds more than {MAX_ENTRIES:,} entries")
    out: list[list[Phrase]] = []
    seen: dict[tuple[str, ...], str] = {}
    for n, group in enumerate(groups, 1):
        if not (isinstance(group, list) and all(isinstance(e, str) for e in group)):
            raise ValueError(f"group {n} must be a list of words and phrases (strings)")
        if len(group) < 2:
            raise ValueError(f"group {n} must list two entries or more")
        analyzed = []
        for entry in group:
            p = phrase(entry)
            if p is None:
                raise ValueError(
                    f"{entry!r} (group {n}) holds no word that is searched (only stop words?)"
                )
            if p.keys in seen:
                raise ValueError(
                    f"{entry!r} (group {n}) is written twice in the file (as {seen[p.keys]!r}); "
                    "an entry belongs to one group"
                )
            seen[p.keys] = entry
            analyzed.append(p)
        out.append(analyzed)
    return out


@cache
def load_synonyms(path: Path | None = None) -> Synonyms:
    """The synonyms of the file at ``path`` (None: the default list), read once per
    process. Raises ValueError (``synonym_groups``) or OSError when it cannot be read."""
    return Synonyms.of(synonym_groups((path or DEFAULT_SYNONYMS).read_text("utf-8")))


def unreadable(path: Path | None) -> str | None:
    """Why the synonyms file at ``path`` cannot be used, in one sentence; None when it
    reads (``load_synonyms``)."""
    try:
        load_synonyms(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    except ValueError as exc:
        return str(exc)
    return None


def search_synonyms(path: Path | None) -> Synonyms:
    """The synonyms a search uses: ``load_synonyms(path)``, or none when the file cannot
    be read, the reason logged (stderr) at each search. The search still answers, as it
    did before the list existed. ``serve`` refuses such a file before it starts
    (``admin.preflight``); a server built in process gets here."""
    reason = unreadable(path)
    if reason is None:
        return load_synonyms(path)
    log.error(
        f"search synonyms file {path} unreadable ({reason}); searching without synonyms; "
        "fix it or unset TICKET_SERVER_SEARCH_SYNONYMS"
    )
    return Synonyms({})
