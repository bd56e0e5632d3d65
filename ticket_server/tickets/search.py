"""Full-text search over tickets: the user's words, filters, ranking and keyset paging.

The query is words, never query syntax: it is split into word tokens (Unicode letters
and digits) and each token is passed to the engine as a quoted term, so quotes, `*`,
`-`, `AND`, `NEAR(` and parentheses are plain text. All tokens must match (AND).

Ranking is relevance within recency windows. The matches are cut, newest ticket first
(by the integer key, i.e. creation order), into windows of ``RANK_WINDOW`` tickets; the
first window is ranked best first, then the second, and so on. A search with at most
``RANK_WINDOW`` matches is therefore ranked exactly; a frequent word ranks the newest
matches, and only they are scored, so the cost of a page is bounded by the window
instead of growing with the number of matches (exact top-k over every match of a word
found in a quarter of a million tickets takes hundreds of milliseconds on both engines).
Every match is still reachable by paging, exactly once while the tickets do not change
(keyset paging; bm25 uses whole-table statistics, so many new tickets can also reorder a
window between two pages).
- SQLite: FTS5 ``bm25(tickets_fts, 2.0, 1.0)`` (subject weighs twice the body;
  lower is better), tokenizer ``unicode61 remove_diacritics 2`` (case and accents folded).
- PostgreSQL: ``-ts_rank(search_vector, query)`` over a ``simple`` tsvector of
  ``unaccent(lower(text))`` (subject weight A, body weight B).
Ties are broken by the integer key, so a page boundary is a total order.
An empty query lists the filtered tickets newest first (``updated_at`` descending).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, column, func, literal_column, or_, select, table
from sqlalchemy.sql.elements import ColumnElement

from ticket_server.settings import Settings
from ticket_server.tickets.models import Ticket, TicketStatus

MAX_TERMS = 16
MAX_TERM_LENGTH = 64
_WORD = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits; `_` separates like FTS5 does

_fts = table("tickets_fts", column("rowid"))
_FTS_TABLE = literal_column("tickets_fts")


def search_terms(query: str) -> list[str]:
    """The word tokens of ``query``: at most ``MAX_TERMS``, each at most ``MAX_TERM_LENGTH``."""
    return [w[:MAX_TERM_LENGTH] for w in _WORD.findall(query)][:MAX_TERMS]


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression requiring every term, each quoted as a literal string."""
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


@dataclass(frozen=True)
class SearchFilters:
    """What narrows a search. ``queues`` is the caller's scope (None = every queue);
    ``queue`` the one queue asked for."""

    statuses: tuple[TicketStatus, ...] | None = None
    queue: str | None = None
    owner: str | None = None
    updated_after: datetime | None = None
    queues: frozenset[str] | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        out: list[ColumnElement[bool]] = []
        if self.statuses:
            out.append(Ticket.status.in_(self.statuses))
        if self.queue is not None:
            out.append(Ticket.queue == self.queue)
        if self.queues is not None:
            out.append(Ticket.queue.in_(sorted(self.queues)))
        if self.owner is not None:
            out.append(Ticket.owner == self.owner)
        if self.updated_after is not None:
            out.append(Ticket.updated_at > self.updated_after)
        return out


RANK_WINDOW: int = Settings.model_fields["search_rank_window"].default
"""How many matches, newest first, are ranked together by default (see the module
docstring): the default of the setting ``TICKET_SERVER_SEARCH_RANK_WINDOW``."""


@dataclass(frozen=True)
class Position:
    """Where a page ended: the last ticket's integer key and its place in the order.

    Newest-first listing: ``sort`` is the ticket's ``updated_at``. Ranked search:
    ``window`` is the ranking window (its highest key: its newest match) and ``sort`` the
    ticket's 0-based place in that window's ranking. A place, not a score: bm25's
    scores move whenever a ticket is added (whole-table statistics) while the order
    inside a window, whose members are fixed by their keys, rarely does.
    """

    sort: Any
    pk: int
    window: int | None = None


def build_listing(filters: SearchFilters, after: Position | None, limit: int) -> Select[Any]:
    """The newest-first listing (empty query): ticket columns and ``sort`` (updated_at), in page order."""
    sort = Ticket.updated_at
    after_cond = []
    if after is not None:
        after_cond.append(or_(sort < after.sort, and_(sort == after.sort, Ticket.pk < after.pk)))
    return (
        select(*Ticket.__table__.c, sort.label("sort"))
        .where(*filters.conditions(), *after_cond)
        .order_by(sort.desc(), Ticket.pk.desc())
        .limit(limit)
    )


def build_window(
    dialect: str, terms: list[str], filters: SearchFilters, upto: int | None, size: int = RANK_WINDOW
) -> Select[Any]:
    """(pk, sort) of one ranking window: the ``size`` newest matches with a key
    at most ``upto`` (None: the newest matches), newest first. Only these rows are
    scored: the engines compute a score per row the LIMIT lets through."""
    where = filters.conditions()
    if dialect == "sqlite":
        score: ColumnElement[Any] = func.bm25(_FTS_TABLE, 2.0, 1.0)
        key: ColumnElement[Any] = _fts.c.rowid  # FTS5 walks its index backwards by rowid
        window = select(key.label("pk"), score.label("sort")).select_from(_fts)
        if where:  # filters need the tickets row
            window = window.join(Ticket, Ticket.pk == key)
        where.append(_FTS_TABLE.op("MATCH")(fts5_match(terms)))
    elif dialect == "postgresql":
        vector = literal_column("tickets.search_vector")
        tsquery = func.plainto_tsquery(
            literal_column("'simple'::regconfig"), func.ticket_search_text(" ".join(terms))
        )
        key = Ticket.pk
        window = select(key.label("pk"), (-func.ts_rank(vector, tsquery)).label("sort"))
        where.append(vector.op("@@")(tsquery))
    else:
        raise NotImplementedError(f"full-text search is not implemented for {dialect}")
    if upto is not None:
        where.append(key <= upto)
    return window.where(*where).order_by(key.desc()).limit(size)
