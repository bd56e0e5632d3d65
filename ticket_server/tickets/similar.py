"""Similar tickets: more-like-this over the search index.

A ticket's most distinctive words become a search query, run through the search
module's own query path (``TicketRepository.search``: the same analyzer, the same
ranking, the same scope), so "like this one" means what a search means:

1. the ticket's words, as the analyzer tokenises its subject and body
   (``analyzer.query_words``), are weighed by ``search.analyze_query`` (the idf the
   ranking uses); a word's score is its weight x (2 in the subject + 1 in the body),
   subject above body as in the ranking;
2. words no other ticket holds are left out (they cannot find anything), and the
   ``MAX_TERMS`` best become the query (best first, so the ranking sees them in order);
3. the search (best match first: the tickets holding the most of these words, then the
   highest score) runs within the caller's queues and the given statuses, the ticket
   itself left out;
4. each hit says why it matched: the query words it holds (read from the tickets' token
   columns in one more read).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, func, select, union_all

from ticket_server.tickets.analyzer import MAX_WORDS, query_words
from ticket_server.tickets.domain import TicketStatus
from ticket_server.tickets.models import SearchTerm, SearchTermDelta, Ticket
from ticket_server.tickets.repository import TicketRepository
from ticket_server.tickets.schemas import TicketSummaryV2

MAX_TERMS = 6
"""Words of the ticket a similar-tickets query holds: few and distinctive, since the
ranking puts the tickets holding the most query words first."""
MAX_SOURCE_WORDS = 240
"""The body's first words weighed (one read per ``MAX_WORDS`` of them)."""
_TICKETS, _TERMS, _DELTAS = Ticket.__table__, SearchTerm.__table__, SearchTermDelta.__table__


@dataclass(frozen=True)
class Term:
    """One word of the query: its token, the word as written in the ticket, its score."""

    token: str
    word: str
    score: int


@dataclass(frozen=True)
class SimilarHit:
    ticket: TicketSummaryV2
    shared: list[str]
    """The query words this ticket holds, best first (as written in the source ticket)."""


@dataclass(frozen=True)
class Similar:
    source: TicketSummaryV2
    terms: list[Term]
    hits: list[SimilarHit]


def distinctive_terms(conn: Connection, subject: str, body: str) -> list[Term]:
    """The ticket's words held by at least one other ticket, best first (see the module
    docstring); at most ``MAX_TERMS``."""
    from ticket_server.tickets.search import analyze_query

    in_subject = dict(query_words(subject, limit=None))
    in_body = dict(query_words(body, limit=MAX_SOURCE_WORDS))
    written = {**in_body, **in_subject}
    tokens = list(written)
    weights: dict[str, int] = {}
    # analyze_query weighs at most MAX_WORDS words per call: the words in groups.
    for start in range(0, len(tokens), MAX_WORDS):
        group = tokens[start : start + MAX_WORDS]
        analyzed = analyze_query(conn, " ".join(written[t] for t in group))
        for w in analyzed.words:
            if w.instead is None:
                weights[w.token] = w.weight
    holding_others = _held_elsewhere(conn, weights) if weights else set()
    terms = [
        Term(
            token,
            written[token],
            weights[token] * (2 * (token in in_subject) + (token in in_body)),
        )
        for token in tokens
        if token in holding_others
    ]
    terms.sort(key=lambda t: (-t.score, t.token))
    return terms[:MAX_TERMS]


def _held_elsewhere(conn: Connection, tokens: Iterable[str]) -> set[str]:
    """The ``tokens`` more than one ticket holds (this one and another): their
    ``search_terms`` counts plus the deltas writes left (``SearchTermDelta``)."""
    wanted = sorted(tokens)
    counted = union_all(
        select(_TERMS.c.term, _TERMS.c.tickets).where(_TERMS.c.term.in_(wanted)),
        select(_DELTAS.c.term, _DELTAS.c.tickets).where(_DELTAS.c.term.in_(wanted)),
    ).subquery()
    rows = conn.execute(
        select(counted.c.term).group_by(counted.c.term).having(func.sum(counted.c.tickets) > 1)
    )
    return {r.term for r in rows}


async def similar_tickets(
    repo: TicketRepository,
    ticket_id: str,
    queues: frozenset[str] | None,
    statuses: tuple[TicketStatus, ...] | None,
    limit: int,
) -> Similar | None:
    """The tickets most like ``ticket_id`` within ``queues`` (None: every queue) and
    ``statuses`` (None: any), best first, at most ``limit``; None when the ticket is
    missing or outside ``queues``."""
    from ticket_server.tickets.search import SearchFilters

    def source(conn: Connection) -> tuple[TicketSummaryV2, list[Term]] | None:
        stmt = select(
            *(_TICKETS.c[name] for name in TicketSummaryV2.model_fields),
            _TICKETS.c.body,
        ).where(_TICKETS.c.id == ticket_id)
        if queues is not None:
            stmt = stmt.where(_TICKETS.c.queue.in_(sorted(queues)))
        row = conn.execute(stmt).mappings().first()
        if row is None:
            return None
        summary = TicketSummaryV2.model_validate(dict(row))
        return summary, distinctive_terms(conn, row["subject"], row["body"])

    found = await repo.read(source)
    if found is None:
        return None
    summary, terms = found
    if not terms:
        return Similar(summary, [], [])
    filters = SearchFilters(statuses=statuses, queues=queues)
    query = " ".join(t.word for t in terms)
    result = await repo.search(query, filters, "relevance", None, limit + 1)
    tickets = [t for t, _ in result.tickets if t.id != ticket_id][:limit]
    held = await repo.read(lambda conn: _tokens_of(conn, [t.id for t in tickets]))
    hits = [
        SimilarHit(t, [term.word for term in terms if term.token in held.get(t.id, set())])
        for t in tickets
    ]
    return Similar(summary, terms, hits)


def _tokens_of(conn: Connection, ids: list[str]) -> dict[str, set[str]]:
    """Each ticket's search tokens (subject and body), by id."""
    if not ids:
        return {}
    rows = conn.execute(
        select(_TICKETS.c.id, _TICKETS.c.search_subject, _TICKETS.c.search_body).where(
            _TICKETS.c.id.in_(ids)
        )
    )
    return {r.id: set(r.search_subject.split()) | set(r.search_body.split()) for r in rows}
