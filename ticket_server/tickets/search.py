"""Full-text search over tickets: the user's words, filters, ranking and keyset paging.

The query is words, never query syntax: it is split into word tokens (Unicode letters
and digits) and each token is passed to the engine as a quoted term, so quotes, `*`,
`-`, `AND`, `NEAR(` and parentheses are plain text. All tokens must match (AND).

Ranking, best first, ties broken by the ticket's integer key so that a page boundary
is a total order and pages never overlap or skip:
- SQLite: FTS5 ``bm25(tickets_fts, 2.0, 1.0)`` (subject weighs twice the body;
  lower is better), tokenizer ``unicode61 remove_diacritics 2`` (case and accents folded).
- PostgreSQL: ``-ts_rank(search_vector, query)`` over a ``simple`` tsvector of
  ``unaccent(lower(text))`` (subject weight A, body weight B).
An empty query lists the filtered tickets newest first (``updated_at`` descending).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, column, func, literal_column, or_, select, table
from sqlalchemy.sql.elements import ColumnElement

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


@dataclass(frozen=True)
class Position:
    """Where a page ended: the last ticket's sort value and integer key."""

    sort: Any  # float score for ranked search, datetime for the newest-first listing
    pk: int


def _after(
    sort_expr: ColumnElement[Any], position: Position | None, *, descending: bool, key: ColumnElement[Any] = Ticket.pk
) -> list[ColumnElement[bool]]:
    if position is None:
        return []
    if descending:
        return [or_(sort_expr < position.sort, and_(sort_expr == position.sort, key < position.pk))]
    return [or_(sort_expr > position.sort, and_(sort_expr == position.sort, key > position.pk))]


def build_search(
    dialect: str,
    terms: list[str],
    filters: SearchFilters,
    after: Position | None,
    limit: int,
) -> Select[Any]:
    """A SELECT of (Ticket, sort value) rows for one page, in page order."""
    where = filters.conditions()
    if not terms:
        sort = Ticket.updated_at
        return (
            select(Ticket, sort.label("sort"))
            .where(*where, *_after(sort, after, descending=True))
            .order_by(sort.desc(), Ticket.pk.desc())
            .limit(limit)
        )
    # Two phases: rank (key, score) pairs only, then fetch the page's rows. Ranking scores
    # every match before LIMIT applies, so the sort must not carry whole tickets (bodies).
    key: ColumnElement[Any] = Ticket.pk
    if dialect == "sqlite":
        score: ColumnElement[Any] = func.bm25(_FTS_TABLE, 2.0, 1.0)
        if where:  # filters need the tickets row
            ranked = select(Ticket.pk.label("pk"), score.label("sort")).join(_fts, _fts.c.rowid == Ticket.pk)
        else:  # relevance alone never touches the tickets table
            key = _fts.c.rowid
            ranked = select(key.label("pk"), score.label("sort")).select_from(_fts)
        where.append(_FTS_TABLE.op("MATCH")(fts5_match(terms)))
    elif dialect == "postgresql":
        vector = literal_column("tickets.search_vector")
        tsquery = func.plainto_tsquery(
            literal_column("'simple'::regconfig"), func.ticket_search_text(" ".join(terms))
        )
        score = -func.ts_rank(vector, tsquery)
        ranked = select(Ticket.pk.label("pk"), score.label("sort"))
        where.append(vector.op("@@")(tsquery))
    else:
        raise NotImplementedError(f"full-text search is not implemented for {dialect}")
    page = (
        ranked.where(*where, *_after(score, after, descending=False, key=key))
        .order_by(score, key)
        .limit(limit)
        .subquery("page")
    )
    return (
        select(Ticket, page.c.sort)
        .join(page, page.c.pk == Ticket.pk)
        .order_by(page.c.sort, page.c.pk)
    )
