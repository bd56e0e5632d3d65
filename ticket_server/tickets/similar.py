"""Similar tickets: more-like-this over the search index.

A ticket's most distinctive words become the query, ranked as a search ranks
(``tickets.search``: the tickets holding the most query words first, then the highest
score, then the newest), over a bounded set of candidates, so the cost stays flat as
the table grows:

1. the ticket's words, as the analyzer tokenises its subject and body
   (``analyzer.query_words``), are weighed with the idf the ranking uses (one read of
   ``search_terms`` and the deltas writes left); a word's score is its weight x (2 in
   the subject + 1 in the body), subject above body as in the ranking;
2. words no other ticket holds are left out (they cannot find anything), and the
   ``MAX_TERMS`` best become the query;
3. the candidates are each word's ``PER_WORD`` best holders (read from the postings in
   the order a relevance search reads them: subject and body first, then the newest),
   the ticket itself left out, those within the caller's queues and the given statuses
   kept, summed and cut to the ``RERANKED`` best in one statement. A distinctive word
   is held by few tickets, so all its holders are read; a frequent word's older holders
   are not, and weigh little in the rank;
4. those are ranked exactly from their token columns (as ``search._rank`` ranks in SQL,
   which on PostgreSQL costs more: each test of a word reads the body again), and each
   hit says why it matched: the query words it holds.

So the cost is bounded by ``MAX_TERMS`` x ``PER_WORD`` postings, whatever the table's
size and the caller's scope. The price: a ticket holding only frequent words, none of
them among their first ``PER_WORD`` holders, is not a candidate (for a caller limited to
a small queue, fewer of a frequent word's holders are in scope). ``bench/related.py``
prints how often the first ten equal those of the exact rank over every ticket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Integer, cast, func, select, union_all

from ticket_server.tickets.analyzer import query_words
from ticket_server.tickets.domain import TicketStatus
from ticket_server.tickets.models import SearchPosting, Ticket
from ticket_server.tickets.repository import TicketRepository
from ticket_server.tickets.schemas import TicketSummaryV2
from ticket_server.tickets.search import (
    BODY_WEIGHT,
    MATCHED,
    SUBJECT_WEIGHT,
    TOTAL,
    SearchFilters,
    idf_weight,
    term_counts,
)

MAX_TERMS = 6
"""Words of the ticket a similar-tickets query holds: few and distinctive, since the
ranking puts the tickets holding the most query words first."""
MAX_SOURCE_WORDS = 240
"""The body's first words weighed."""
PER_WORD = 1000
"""Holders read per query word, best first: the bound on a call's cost."""
RERANKED = 200
"""Candidates ranked exactly (their token columns read), at least ``limit``."""
_TICKETS, _POSTINGS = Ticket.__table__, SearchPosting.__table__


@dataclass(frozen=True)
class Term:
    """One word of the query: its token, the word as written in the ticket, its weight
    (the ranking's idf) and its score in the ticket (weight x place)."""

    token: str
    word: str
    weight: int
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
    in_subject = dict(query_words(subject, limit=None))
    in_body = dict(query_words(body, limit=MAX_SOURCE_WORDS))
    written = {**in_body, **in_subject}
    counts = term_counts(conn, [TOTAL, *written])
    total = max(counts.get(TOTAL, 0), 1)
    terms = []
    for token, word in written.items():
        holding = counts.get(token, 0)
        if holding > 1:  # this ticket and another
            w = idf_weight(total, holding)
            terms.append(Term(token, word, w, w * (2 * (token in in_subject) + (token in in_body))))
    terms.sort(key=lambda t: (-t.score, t.token))
    return terms[:MAX_TERMS]


def _candidates(conn: Connection, pk: int, terms: list[Term], conditions: list[Any]) -> list[int]:
    """The keys of the ``RERANKED`` best tickets meeting ``conditions`` among each term's
    ``PER_WORD`` best holders (ticket ``pk`` left out), by the rank their holdings give
    (``search.MATCHED`` per word held, plus its weight x impact), the later key first
    among equals. Scope: ``ix_tickets_scope`` answers it without the tickets' rows."""
    p, t = _POSTINGS.c, _TICKETS.c
    arms = []
    for term in terms:
        holders = (
            select(p.ticket_pk, p.impact)
            .where(p.term == term.token, p.ticket_pk != pk)
            .order_by(p.impact.desc(), p.created_at.desc(), p.ticket_pk.desc())
            .limit(PER_WORD)
            .subquery()
        )
        # impact is a SMALLINT: uncast, PostgreSQL would type the score as one (overflow).
        impact = cast(holders.c.impact, Integer)
        score = (impact * term.weight + MATCHED).label("score")
        arm = select(holders.c.ticket_pk, score)
        if conditions:  # the tickets' rows read only for these
            arm = arm.join(_TICKETS, t.pk == holders.c.ticket_pk).where(*conditions)
        arms.append(arm)
    held = union_all(*arms).subquery()
    rank = func.sum(held.c.score)
    best = (
        select(held.c.ticket_pk)
        .group_by(held.c.ticket_pk)
        .order_by(rank.desc(), held.c.ticket_pk.desc())
        .limit(RERANKED)
    )
    return list(conn.execute(best).scalars())


def _ranked(conn: Connection, pks: list[int], terms: list[Term], limit: int) -> list[SimilarHit]:
    """The tickets ``pks`` ranked exactly from their token columns (as
    ``search._rank``), best first, at most ``limit``, each with the terms it holds."""
    if not pks:
        return []
    names = list(TicketSummaryV2.model_fields)
    rows = conn.execute(
        select(
            _TICKETS.c.pk,
            _TICKETS.c.created_at,
            _TICKETS.c.search_subject,
            _TICKETS.c.search_body,
            *(_TICKETS.c[name] for name in names),
        ).where(_TICKETS.c.pk.in_(pks))
    ).mappings()
    scored = []
    for row in rows:
        subject, body = set(row["search_subject"].split()), set(row["search_body"].split())
        rank, shared = 0, []
        for term in terms:
            impact = SUBJECT_WEIGHT * (term.token in subject) + BODY_WEIGHT * (term.token in body)
            if impact:
                rank += MATCHED + impact * term.weight
                shared.append(term.word)
        ticket = TicketSummaryV2.model_validate({name: row[name] for name in names})
        scored.append(((rank, row["created_at"], row["pk"]), SimilarHit(ticket, shared)))
    scored.sort(key=lambda s: s[0], reverse=True)
    return [hit for _, hit in scored[:limit]]


async def similar_tickets(
    repo: TicketRepository,
    ticket_id: str,
    queues: frozenset[str] | None,
    statuses: tuple[TicketStatus, ...] | None,
    limit: int,
) -> Similar | None:
    """The tickets most like ``ticket_id`` within ``queues`` (None: every queue) and
    ``statuses`` (None: any), best first, at most ``limit``; None when the ticket is
    missing or outside ``queues``. One read."""
    filters = SearchFilters(statuses=statuses, queues=queues)

    def read(conn: Connection) -> Similar | None:
        stmt = select(
            _TICKETS.c.pk,
            _TICKETS.c.body,
            *(_TICKETS.c[name] for name in TicketSummaryV2.model_fields),
        ).where(_TICKETS.c.id == ticket_id, *filters.scope())
        row = conn.execute(stmt).mappings().first()
        if row is None:
            return None
        source = TicketSummaryV2.model_validate(
            {name: row[name] for name in TicketSummaryV2.model_fields}
        )
        terms = distinctive_terms(conn, row["subject"], row["body"])
        if not terms:
            return Similar(source, [], [])
        pks = _candidates(conn, row["pk"], terms, filters.conditions())
        return Similar(source, terms, _ranked(conn, pks, terms, max(limit, 1)))

    return await repo.read(read)
