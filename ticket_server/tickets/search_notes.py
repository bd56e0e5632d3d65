"""The ``note`` of a search page (``explain``): what the search did with the query's words
(those left out, replaced by a typo's neighbour, searched in other forms) and, for an
empty page, which filter removed every match. Kept apart from ``tickets.search``, whose
statements it reuses to ask what a filter leaves."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.sql.elements import ColumnElement

from ticket_server.tickets.analyzer import MAX_WORDS
from ticket_server.tickets.models import Ticket
from ticket_server.tickets.search import MATCHED, Query, SearchFilters, Word, sort_keys


def _quoted(words: Iterable[Word | str]) -> str:
    return ", ".join(f"'{w.typed if isinstance(w, Word) else w}'" for w in words)


def _unsearched(query: Query, alone: bool) -> str:
    """The words of the query that are never searched: its one-letter words, and when
    they are ``alone`` in the query, its stop words too."""
    one, stop = _quoted(query.one_letter), _quoted(query.stop_words)
    if not alone:
        return f"One-letter words are not searched: {one}."
    if query.one_letter and query.stop_words:
        return (
            f"The query has only common words ({stop}) and one-letter words ({one}), which "
            "are not searched; add a more specific word."
        )
    if query.one_letter:
        return f"One-letter words are not searched: {one}; add a more specific word."
    return f"The query has only common words ({stop}), which are not searched; add a more specific word."


def explain(
    conn: Connection,
    dialect: str,
    query: Query,
    filters: SearchFilters,
    first: Any | None,
    continued: bool,
) -> str | None:
    """A note for the model on what the search did with its words and filters, or None
    when the page simply holds tickets with every word. ``first`` is the page's first
    row (None when the page is empty); ``continued``: a page after the first."""
    notes: list[str] = []
    holder = "ticket or comment" if query.conversation else "ticket"
    if query.text.strip() and not query.has_words:
        notes.append(
            "The query holds no letters or digits, so no word was searched: these are the "
            "newest tickets, as for an empty query."
        )
    if query.beyond:
        notes.append(
            f"Only the first {MAX_WORDS} words are searched; left out {_quoted(query.beyond)}."
        )
    for w in query.words:
        if w.instead:
            notes.append(f"No {holder} contains '{w.typed}'; searched '{w.instead}' instead.")
        if not w.as_typed:
            notes.append(
                f"No {holder} contains '{w.typed}' as typed; searched "
                + (f"its synonyms {_quoted(w.also)}." if w.also else "it written another way.")
            )
        elif w.also:
            notes.append(f"'{w.typed}' was also searched as its synonyms {_quoted(w.also)}.")
    if query.missing and query.words:
        notes.append(f"No {holder} contains {_quoted(query.missing)}; left out of the search.")
    if query.has_words and not query.words:
        if query.missing:
            notes.append(
                f"No {holder} contains any of {_quoted(query.missing)}. Try other words or synonyms; "
                "for a known ticket id use get_ticket_status_v2."
            )
        notes.append(_unsearched(query, alone=not query.missing))
        return " ".join(notes)
    if query.one_letter:
        notes.append(_unsearched(query, alone=False))
    matched = (
        first._mapping["rank"] // MATCHED
        if first is not None and query.words and "rank" in first._mapping
        else len(query.words)
    )
    if matched < len(query.words):
        notes.append(
            f"No ticket matches all of {_quoted(query.words)} with these filters; "
            f"first are tickets with {matched} of the {len(query.words)} words."
        )
    if first is None and not continued:
        named = filters.named_conditions()
        candidates, _ = sort_keys(dialect, query.words, "newest", query.conversation)
        base = filters.scope() + ([candidates] if candidates is not None else [])

        def some(*where: ColumnElement[bool]) -> bool:
            return conn.execute(select(Ticket.pk).where(*where).limit(1)).first() is not None

        if named and some(*base):
            alone = [n for n, c in named.items() if not some(*base, c)]
            what = "the words" if query.words else "the tickets you can see"
            if alone:
                notes.append(
                    f"Some of {what} match, but none with {' and none with '.join(alone)} as given; "
                    f"drop or widen {', '.join(alone)}."
                )
            else:
                notes.append(
                    f"Some of {what} match each filter, but none all of {', '.join(named)} together; "
                    "drop one of them."
                )
        elif not query.words:
            notes.append("No tickets in the queues you can see.")
    return " ".join(notes) or None
