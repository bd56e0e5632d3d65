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
from ticket_server.tickets.models import SlaPlanTarget, SlaTarget, Ticket
from ticket_server.tickets.search import MATCHED, Query, SearchFilters, Sort, Word, sort_keys
from ticket_server.tickets.sla import DONE

DUE_FILTER = "due_before"  # the filter that keeps only tickets with an SLA due time


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
    sort: Sort = "relevance",
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
        if query.one_letter or not query.missing:  # nothing to name beside the missing
            notes.append(_unsearched(query, alone=not query.missing))
        return " ".join(notes)
    if query.one_letter:
        notes.append(_unsearched(query, alone=False))
    matched = (
        first._mapping["rank"] // MATCHED
        if first is not None and query.words and "rank" in first._mapping
        else len(query.words)
    )
    if matched < len(query.words) and continued:  # earlier pages may have held them all
        notes.append(
            f"This page starts with tickets holding {matched} of the {len(query.words)} "
            f"words {_quoted(query.words)}; any holding more were on earlier pages."
        )
    elif matched < len(query.words):
        notes.append(
            f"No ticket matches all of {_quoted(query.words)} with these filters; "
            f"first are tickets with {matched} of the {len(query.words)} words."
        )
    if first is None and not continued:
        notes += _empty_page(conn, dialect, query, filters, sort)
    return " ".join(notes) or None


def _empty_page(
    conn: Connection, dialect: str, query: Query, filters: SearchFilters, sort: Sort
) -> list[str]:
    """Why the first page of a search is empty: no ticket in the caller's queues (with
    the words), a filter that no such ticket passes alone, filters that none passes
    together, or, for ``sort="due"`` and ``due_before`` (which keep only the tickets
    with an SLA due time), that the tickets the filters leave have no due time, and why."""
    named = filters.named_conditions()
    every = sort == "due" and not query.conversation  # as ``search._due_page`` selects
    candidates, _ = sort_keys(dialect, query.words, "newest", query.conversation, every)
    base = filters.scope() + ([candidates] if candidates is not None else [])

    def some(*where: ColumnElement[bool]) -> bool:
        return conn.execute(select(Ticket.pk).where(*where).limit(1)).first() is not None

    if not some(*base):
        if not query.words:
            return ["No tickets in the queues you can see."]
        if every and len(query.words) > 1:
            return [
                f"No ticket holds all of {_quoted(query.words)}: sort 'due' lists only the "
                "tickets holding every word."
            ]
        return []
    timed = sort == "due" or DUE_FILTER in named
    plain = {n: c for n, c in named.items() if n != DUE_FILTER}
    due = Ticket.sla_due_at.is_not(None)
    if timed and not some(*base, due):
        return [_none_due(conn, query, sort, named, None, base)]
    what = "the words" if query.words else "the tickets you can see"
    alone = [n for n, c in plain.items() if not some(*base, c)]
    if alone:
        return [
            f"Some of {what} match, but none with {' and none with '.join(alone)} as given; "
            f"drop or widen {', '.join(alone)}."
        ]
    if len(plain) > 1 and not some(*base, *plain.values()):
        return [
            f"Some of {what} match each filter, but none all of {', '.join(plain)} together; "
            "drop one of them."
        ]
    where = [*base, *plain.values()]
    if timed and not some(*where, due):
        return [_none_due(conn, query, sort, named, filters, where)]
    if DUE_FILTER in named:
        return [
            f"Some {_tickets(query, filters, plain)} have an SLA due time, but none before "
            f"{DUE_FILTER}; widen it."
        ]
    if named:  # not met: the filters together leave a ticket, and the page would hold it
        return [f"No ticket passes all of {', '.join(named)} together; drop one of them."]
    return []


def _tickets(
    query: Query, filters: SearchFilters | None, names: Iterable[str], noun: str = "tickets"
) -> str:
    """The tickets a search looked at, in words: ``tickets you can see with status
    closed``, ``tickets with the words and priority low`` (a status or priority filter
    with its values, ``breached`` with true or false, another filter by name)."""
    values: dict[str, str] = {}
    if filters:
        values = {
            "status": "/".join(v.value for v in filters.statuses or ()),
            "priority": "/".join(v.value for v in filters.priorities or ()),
            "breached": str(filters.breached).lower(),  # "breached" alone reads as true
        }
    described = [f"{n} {values[n]}" if n in values else n for n in names]
    if query.words:
        return " and ".join([f"{noun} with the words", *described])
    return " with ".join([f"{noun} you can see", ", ".join(described)][: 1 + bool(described)])


def _none_due(
    conn: Connection,
    query: Query,
    sort: Sort,
    named: Iterable[str],
    filters: SearchFilters | None,
    where: list[ColumnElement[bool]],
) -> str:
    """The note for tickets ``where`` selects (by ``filters``; None: by none of them)
    that have no SLA due time, when ``sort="due"`` or ``due_before`` keeps only those
    that have one: why they have none, and what lists them."""
    names = [n for n in named if n != DUE_FILTER] if filters else []
    if sort == "due":
        keeps = "sort 'due' lists only the tickets with one; sort 'newest' lists them all."
    else:
        keeps = f"{DUE_FILTER} keeps only the tickets with one; drop it to list the others."
    because = _no_due(conn, filters, where)
    return (
        f"No {_tickets(query, filters, names, 'ticket')} has an SLA due time ({because}). {keeps}"
    )


def _no_due(
    conn: Connection, filters: SearchFilters | None, where: list[ColumnElement[bool]]
) -> str:
    """Why the tickets ``where`` selects have no SLA due time (``sla_store.stored_columns``)."""
    if filters and filters.statuses and set(filters.statuses) <= DONE:
        return "a resolved or closed ticket has none: nothing is due on it"
    targets = [select(t.__table__).limit(1) for t in (SlaTarget, SlaPlanTarget)]
    if not any(conn.execute(t).first() for t in targets):
        return "no SLA targets are loaded: an operator loads a policy with `ticket-server sla load`"
    if (
        conn.execute(select(Ticket.pk).where(*where, Ticket.sla_covered.is_(True)).limit(1)).first()
        is None
    ):
        return "no SLA target applies to them: the SLA policy has none for their queue and priority"
    return (
        "a ticket has one while an SLA target of its runs unmet: not once met, while its "
        "status pauses the clock, or when it is resolved or closed"
    )
