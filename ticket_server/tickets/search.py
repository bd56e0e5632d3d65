"""Full-text search over tickets: the user's words, filters, ranking and keyset paging.

Text goes through ``tickets.analyzer`` on the way in (the repository stores a ticket's
subject and body as tokens, ``search_subject``/``search_body``) and the query through
the same analyzer, so SQLite and PostgreSQL see the same tokens: the query is words,
never query syntax. The engines' full-text indexes find candidates, tickets with any
query word:
- SQLite: FTS5 table ``tickets_fts`` over the token columns (``unicode61``,
  ``tokenchars '_'``), ``MATCH '"w1" OR "w2"'``.
- PostgreSQL: ``search_vector``, the token columns cast to ``tsvector`` (no parser),
  GIN-indexed, ``@@ 'w1' | 'w2'``.

Ranking, the same SQL on both engines, so both return the same order:
1. matched: how many query words the ticket holds (all the words first, then most);
2. score: BM25 with binary term frequency and no length normalisation, subject
   above body: the sum over the words it holds of ``idf(word) x (2 in subject + 1 in
   body)``, ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))`` (N tickets, n holding the word),
   in integer hundredths, so both engines compute exactly the same number;
3. recency, ``created_at`` newest first (``recency``), then the integer key.
``sort="newest"`` drops the score: the tickets with the most query words, newest first.

A search of the conversation (``conversation=True``) also finds tickets by their comments
(every comment, internal notes too, as the full ticket read shows them): comment bodies
are analyzed the same way (``comments.search_body``; FTS5 ``comments_fts`` on SQLite,
``comments.search_vector`` on PostgreSQL); a word in any comment counts like a word in
the body, and a word's weight counts the tickets and comments holding it.

Two plans give the same pages:
- Best first (``relevance_page``), for a relevance search of the tickets' own text
  filtered at most by scope, queue, status and priority: each ticket's tokens are also
  stored as search postings (``ticket_search_postings``: token, impact = the ticket's score for
  the token before the word's weight, ``created_at``, key; its primary key is that
  order), written with the ticket's text only: a status, owner or note write changes no
  posting. The words'
  postings are read best first in batches, and the reading stops once no ticket not yet
  read can rank above the page (Fagin's threshold algorithm); the tickets read are
  scored with the ranking's SQL above. The cost follows how deep the page lies in the
  postings: a page of a frequent word is its first few dozen postings. A query of
  several words first tries the tickets holding every word (a ticket holding every
  word ranks above any holding fewer, so when they fill the page they are the page),
  found from the postings alone: they fall into groups by the impact of each word, a
  group's score is known before any ticket is read, and the groups are intersected
  highest score first (``every_word_page``). When that would read too much, the words
  are read best first as above, then the engine's full-text AND is scored; when the
  tickets holding every word do not fill the page, every holder is scored, as below.
- Every holder scored (``build_page``), for every other search (``sort="newest"``, the
  conversation, an owner, customer or date filter): the engines find the candidates and
  each is scored, so the cost follows how many tickets hold the words.

``sort="due"`` lists the tickets with a next SLA due time (``tickets.sla_due_at``),
soonest first down its index; words then only select (the tickets holding every word,
any word for the conversation).

A word no ticket holds is left out of the query, or replaced by the most frequent
word one letter away (a typo); the page's note says so (``search_notes.explain``). An
empty query lists the filtered tickets newest first. Paging is keyset paging on the
sort key, so every match comes once while the tickets do not change.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache
from itertools import product
from typing import Any, Literal

from sqlalchemy import (
    Connection,
    Integer,
    Row,
    Select,
    String,
    and_,
    any_,
    bindparam,
    case,
    cast,
    column,
    exists,
    func,
    intersect,
    literal,
    literal_column,
    or_,
    select,
    table,
    tuple_,
    union_all,
)
from sqlalchemy.sql.elements import ColumnClause, ColumnElement, Label
from sqlalchemy.sql.selectable import Subquery

from ticket_server.tickets import folding
from ticket_server.tickets.analyzer import (
    MAX_FORMS,
    MAX_WORDS,
    Synonyms,
    fold,
    has_words,
    index_tokens,
    one_letter_words_in,
    query_terms,
    search_text,
    spelling_candidates,
    stop_words_in,
)
from ticket_server.tickets.folding import FOLD_ROWS
from ticket_server.tickets.models import (
    Comment,
    SearchPosting,
    SearchTerm,
    SearchTermDelta,
    Ticket,
    TicketPriority,
    TicketStatus,
)
from ticket_server.tickets.storage import dialect_insert

Sort = Literal["relevance", "newest", "due"]
SUBJECT_WEIGHT, BODY_WEIGHT, COMMENT_WEIGHT = 2, 1, 1
MAX_QUERY_FORMS = 40  # forms searched for all the words of a query together
OTHER_FORM = 90  # % of the weight of a query word as typed that another form weighs at most
MAX_CORRECTIONS = 3  # unknown words of one query looked up for a typo (each ~1,000 candidates)
MAX_NEIGHBOURS = 5  # a typo's most frequent known neighbours tried, for a caller limited to queues
MATCHED = (
    10_000_000  # above any score: 16 words x 4 x a weight of at most ~1,400 (idf of 1 in 10^6)
)
TOTAL = ""  # the search_terms row that counts the tickets and comments indexed

_fts = table("tickets_fts", column("rowid"))
_FTS_TABLE: ColumnClause[Any] = literal_column("tickets_fts")
_VECTOR: ColumnClause[Any] = literal_column("tickets.search_vector")
_TERMS = SearchTerm.__table__
_DELTAS = SearchTermDelta.__table__
_POSTINGS = SearchPosting.__table__
_COMMENTS = Comment.__table__
_comments_fts = table("comments_fts", column("rowid"))
_COMMENTS_FTS_TABLE: ColumnClause[Any] = literal_column("comments_fts")
_COMMENT_VECTOR: ColumnClause[Any] = literal_column("comments.search_vector")


# -- writing ------------------------------------------------------------------------


def search_columns(subject: str, body: str) -> dict[str, str]:
    """The stored search columns of a ticket with this subject and body."""
    return {
        "search_subject": search_text(index_tokens(subject)),
        "search_body": search_text(index_tokens(body)),
    }


def ticket_terms(columns: dict[str, str]) -> set[str]:
    """The distinct tokens of a ticket's search columns."""
    return set(columns["search_subject"].split()) | set(columns["search_body"].split())


def postings(columns: Mapping[str, Any]) -> dict[str, int]:
    """A ticket's tokens with their impact (``SUBJECT_WEIGHT`` when the subject holds
    the token + ``BODY_WEIGHT`` when the body does), from its search columns."""
    subject, body = set(columns["search_subject"].split()), set(columns["search_body"].split())
    return {t: SUBJECT_WEIGHT * (t in subject) + BODY_WEIGHT * (t in body) for t in subject | body}


def _posting_rows(tickets: Iterable[Mapping[Any, Any]]) -> list[dict[str, Any]]:
    return [
        {"p_term": term, "p_impact": impact, "p_at": t["created_at"], "p_ticket": t["pk"]}
        for t in tickets
        for term, impact in postings(t).items()
    ]


_POSTING_KEY = and_(
    _POSTINGS.c.term == bindparam("p_term"),
    _POSTINGS.c.impact == bindparam("p_impact"),
    _POSTINGS.c.created_at == bindparam("p_at"),
    _POSTINGS.c.ticket_pk == bindparam("p_ticket"),
)


def post(
    conn: Connection, tickets: Iterable[Mapping[Any, Any]], *, missing_only: bool = False
) -> None:
    """Write the postings of ``tickets`` (mappings with ``pk``, ``created_at`` and the
    search columns) in the caller's transaction. Every ticket written goes through here.
    ``missing_only``: postings stored already are left as they are."""
    rows = _posting_rows(tickets)
    stmt = dialect_insert(conn)(_POSTINGS).values(
        term=bindparam("p_term"),
        impact=bindparam("p_impact"),
        created_at=bindparam("p_at"),
        ticket_pk=bindparam("p_ticket"),
    )
    if missing_only:
        stmt = stmt.on_conflict_do_nothing()
    for start in range(0, len(rows), 5000):
        conn.execute(stmt, rows[start : start + 5000])


def post_unposted_tickets(conn: Connection, after: int, batch: int) -> tuple[int, int]:
    """Write the postings missing for the next ``batch`` tickets after key ``after``
    (``db reindex``): tickets inserted, or changed, by a server older than revision 0008
    while a newer one already served. Returns (the last key looked at, how many tickets
    were looked at; 0 with the key 0: none left).
    A posting of old text that such a change left behind stays: a search scores every
    ticket it reads from the ticket's row, so it costs a read, never a wrong answer."""
    rows = (
        conn.execute(
            select(Ticket.pk, Ticket.created_at, Ticket.search_subject, Ticket.search_body)
            .where(Ticket.pk > after)
            .order_by(Ticket.pk)
            .limit(batch)
        )
        .mappings()
        .all()
    )
    if not rows:
        return 0, 0
    post(conn, rows, missing_only=True)
    return rows[-1]["pk"], len(rows)


def unpost(conn: Connection, tickets: Iterable[Mapping[Any, Any]]) -> None:
    """Remove the postings of ``tickets`` as they are stored (see ``post``)."""
    rows = _posting_rows(tickets)
    if rows:
        conn.execute(_POSTINGS.delete().where(_POSTING_KEY), rows)


def count_terms(
    conn: Connection, delta: Counter[str], of: Literal["tickets", "comments"] = "tickets"
) -> None:
    """Record ``delta`` (term -> change in the number of tickets, or comments, holding it)
    in the caller's transaction, as new ``search_term_deltas`` rows: an insert takes no
    lock another writer waits on, where updating ``search_terms`` would lock each word's
    row (and the total's) until the write commits. ``fold_term_deltas`` adds them to
    ``search_terms`` later; readers count both (``_counts``)."""
    other = "comments" if of == "tickets" else "tickets"
    rows = [{"term": t, of: n, other: 0} for t, n in sorted(delta.items()) if n]
    for start in range(0, len(rows), 5000):
        conn.execute(_DELTAS.insert(), rows[start : start + 5000])


def fold_term_deltas(conn: Connection, limit: int = FOLD_ROWS) -> int:
    """Add up to ``limit`` of the oldest ``search_term_deltas`` rows to ``search_terms``
    and remove them (``folding.fold``); returns how many rows were folded."""
    return folding.fold(
        conn, "search_term_deltas", "search_terms", ("term",), ("tickets", "comments"), limit
    )


def has_term_deltas(conn: Connection) -> bool:
    """Whether any ``search_term_deltas`` row waits to be folded."""
    return folding.has_deltas(conn, "search_term_deltas")


def comment_search_bodies(conn: Connection, bodies: Sequence[str]) -> list[str]:
    """The ``search_body`` column of comments with these bodies, in order; counts their
    tokens in ``search_terms`` (the caller inserts the comments in the same transaction).
    Every comment written goes through here."""
    delta: Counter[str] = Counter()
    out = []
    for body in bodies:
        tokens = index_tokens(body)
        delta.update(tokens)
        out.append(search_text(tokens))
    delta[TOTAL] += len(out)
    count_terms(conn, delta, "comments")
    return out


def analyze_unindexed_comments(conn: Connection, after: int, batch: int) -> tuple[int, int]:
    """Give search text to the next ``batch`` comments after key ``after`` that have none
    (``search_body`` is the column default): comments written by a server older than
    revision 0007 while a newer one already served, which a search of the conversation
    misses. Counts their tokens like ``comment_search_bodies``. Returns (the last key
    looked at, how many comments were given search text; 0 with the key 0: none left).
    A comment with no words keeps the default and is not counted in the total."""
    rows = conn.execute(
        select(_COMMENTS.c.pk, _COMMENTS.c.body)
        .where(_COMMENTS.c.pk > after, _COMMENTS.c.search_body == search_text([]))
        .order_by(_COMMENTS.c.pk)
        .limit(batch)
    ).all()
    if not rows:
        return 0, 0
    delta: Counter[str] = Counter()
    updates = []
    for pk, body in rows:
        tokens = index_tokens(body)
        if tokens:
            delta.update(tokens)
            updates.append({"key": pk, "search_body": search_text(tokens)})
    if updates:
        conn.execute(_COMMENTS.update().where(_COMMENTS.c.pk == bindparam("key")), updates)
        delta[TOTAL] += len(updates)
        count_terms(conn, delta, "comments")
    return rows[-1].pk, len(updates)


# -- reading ------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchFilters:
    """What narrows a search. ``queues`` is the caller's scope (None = every queue);
    ``queue`` the queue names asked for (already resolved to names that exist)."""

    statuses: tuple[TicketStatus, ...] | None = None
    priorities: tuple[TicketPriority, ...] | None = None
    queue: tuple[str, ...] | None = None
    owner: str | None = None
    customer: str | None = None
    created_after: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    queues: frozenset[str] | None = None
    tags: tuple[int, ...] | None = None
    fields: tuple[tuple[int, str, Any], ...] | None = None
    """Tag ids a ticket has all of; (field id, value column, value) it has each of."""
    due_before: datetime | None = None
    breached: bool | None = None
    as_of: datetime | None = None
    """The next SLA due time before ``due_before``; SLA breached (or not) at ``as_of``,
    which ``breached`` needs (the stored columns, ``tickets.sla_store``)."""

    def named_conditions(self, columns: Any = None) -> dict[str, ColumnElement[bool]]:
        """The caller's filters (not the scope), by argument name. ``columns``: the
        columns status, priority, queue and owner are tested on (default: ``tickets``';
        a table of ticket tallies has these alone, ``tickets.counts``)."""
        c = Ticket.__table__.c if columns is None else columns
        out: dict[str, ColumnElement[bool]] = {}
        if self.statuses:
            out["status"] = c.status.in_([str(s) for s in self.statuses])
        if self.priorities:
            out["priority"] = c.priority.in_([str(p) for p in self.priorities])
        if self.queue is not None:
            out["queue"] = c.queue.in_(self.queue)
        if self.owner is not None:
            out["owner"] = func.lower(c.owner) == self.owner.lower()
        if self.customer is not None:
            out["customer"] = Ticket.customer.icontains(self.customer, autoescape=True)
        if self.created_after is not None:
            out["created_after"] = Ticket.created_at > self.created_after
        if self.updated_after is not None:
            out["updated_after"] = Ticket.updated_at > self.updated_after
        if self.updated_before is not None:
            out["updated_before"] = Ticket.updated_at < self.updated_before
        if self.due_before is not None:
            out["due_before"] = Ticket.sla_due_at < self.due_before
        if self.breached is not None:
            if self.as_of is None:
                raise ValueError("breached is judged at a time: as_of")
            late = Ticket.sla_breach_at <= self.as_of
            out["breached"] = late if self.breached else or_(Ticket.sla_breach_at.is_(None), ~late)
        if self.tags or self.fields:
            from ticket_server.tickets.classification import search_conditions

            out.update(search_conditions(self.tags, self.fields))
        return out

    def scope(self, columns: Any = None) -> list[ColumnElement[bool]]:
        queue = Ticket.__table__.c.queue if columns is None else columns.queue
        return [] if self.queues is None else [queue.in_(sorted(self.queues))]

    def conditions(self, columns: Any = None) -> list[ColumnElement[bool]]:
        return [*self.scope(columns), *self.named_conditions(columns).values()]


def resolve_queue(name: str, visible: Iterable[str]) -> tuple[str, ...] | None:
    """The queues among ``visible`` that ``name`` means, ignoring case and accents
    (None when none does)."""
    wanted = fold(name.strip())
    found = tuple(q for q in visible if fold(q) == wanted)
    return found or None


@dataclass(frozen=True)
class Position:
    """Where a page ended: the last ticket's sort key; ``rank`` is set for a search with
    words (see ``sort_keys``). ``updated_at``: the key's time (``recency``: the
    ``created_at`` of a relevance search with words, else ``updated_at``)."""

    updated_at: datetime
    pk: int
    rank: int | None = None


@dataclass(frozen=True)
class Word:
    """A query word as searched: its token, as the user typed it, its weight (0 when
    no ticket holds it) and, for a typo, the word searched instead. A word with other
    forms (``analyzer.query_terms``: compounds, synonyms) has ``forms``, each a
    conjunction of tokens, its own first, with their ``weights`` (each form's idf), and
    ``also``, the synonyms among them as written in the list."""

    token: str
    typed: str
    weight: int
    instead: str | None = None
    forms: tuple[tuple[str, ...], ...] = ()
    weights: tuple[int, ...] = ()
    also: tuple[str, ...] = ()
    as_typed: bool = True
    """False when no ticket holds the word as typed, only another of its forms."""

    @property
    def searched(self) -> tuple[tuple[tuple[str, ...], int], ...]:
        """Each form searched with its weight: ``forms``, or the token alone."""
        if self.forms:
            return tuple(zip(self.forms, self.weights))
        return (((self.token,), self.weight),)

    @property
    def tokens(self) -> list[str]:
        """Every token of its forms."""
        return list(dict.fromkeys(t for form, _ in self.searched for t in form))


def _shape(words: Sequence[Word]) -> tuple[tuple[int, ...], ...]:
    """How many tokens each form of each word has: what the rank's SQL is built for."""
    return tuple(tuple(len(form) for form, _ in w.searched) for w in words)


@dataclass
class Query:
    """The analyzed query: the words searched (weight > 0), the ones left out, the
    stop words and one-letter words dropped, and the words past ``MAX_WORDS`` (not
    searched); ``conversation``: comments are searched too."""

    text: str
    conversation: bool = False
    words: list[Word] = field(default_factory=list)
    missing: list[Word] = field(default_factory=list)
    stop_words: list[str] = field(default_factory=list)
    one_letter: list[str] = field(default_factory=list)
    beyond: list[str] = field(default_factory=list)

    @property
    def has_words(self) -> bool:
        return has_words(self.text)


def idf_weight(total: int, holding: int) -> int:
    """A word's weight in the ranking: its idf (BM25's, x 100, at least 1) among
    ``total`` documents of which ``holding`` hold it."""
    return max(1, round(100 * math.log(1 + (total - holding + 0.5) / (holding + 0.5))))


def _counts(conversation: bool, terms: Any) -> Subquery:
    """(term, holding) for each of ``terms`` (a list or an expanding parameter) that is
    counted: how many tickets (``conversation``: and comments) hold it, its
    ``search_terms`` row plus the deltas not yet folded into it."""
    parts = []
    for counts in (_TERMS, _DELTAS):
        holding = counts.c.tickets + counts.c.comments if conversation else counts.c.tickets
        parts.append(
            select(counts.c.term, holding.label("holding")).where(counts.c.term.in_(terms))
        )
    counted = union_all(*parts).subquery()
    return (
        select(counted.c.term, func.sum(counted.c.holding).label("holding"))
        .group_by(counted.c.term)
        .subquery()
    )


@cache
def _terms_statement(conversation: bool) -> Select[Any]:
    """How many tickets (``conversation``: and comments) hold each of ``terms``."""
    counts = _counts(conversation, bindparam("terms", expanding=True))
    return select(counts.c.term, counts.c.holding)


def term_counts(
    conn: Connection, tokens: Sequence[str], conversation: bool = False
) -> dict[str, int]:
    """How many tickets (``conversation``: and comments) hold each of ``tokens`` (one
    read; ``TOTAL``: how many are indexed); a token none holds is absent."""
    rows = conn.execute(_terms_statement(conversation), {"terms": list(tokens)}).tuples()
    return dict(rows.all())


def analyze_query(
    conn: Connection,
    text: str,
    conversation: bool = False,
    scope: Sequence[ColumnElement[bool]] = (),
    synonyms: Synonyms | None = None,
) -> Query:
    """``text`` analyzed and weighed against ``search_terms`` (one read; one more per
    word no ticket holds, for its one-letter neighbours, for the first
    ``MAX_CORRECTIONS`` such words). With ``conversation`` a word's documents are the
    tickets and the comments holding it. A word's other forms (``query_terms``:
    compounds apart or solid, ``synonyms``) are searched where some ticket holds each
    of their tokens, each form weighed by its own idf (a form of several tokens: by its
    rarest). ``scope`` (``SearchFilters.scope()``): a caller limited to queues; a word
    then counts as held, or offered as a correction, only when a ticket in those queues
    (or its comment) holds it, since the counts cover every queue and a note naming
    such a word would tell of other queues' text."""
    query = Query(text, conversation, stop_words=stop_words_in(text))
    query.one_letter = one_letter_words_in(text)
    terms = query_terms(text, synonyms)
    query.beyond = [term.typed for term in terms[MAX_WORDS:]]
    terms = terms[:MAX_WORDS]
    if not terms:
        return query
    tokens = list(dict.fromkeys(t for term in terms for form in term.forms for t in form))
    counts = term_counts(conn, [TOTAL, *tokens], conversation)
    total = max(counts.get(TOTAL, 0), 1)
    found_by = _conversation_candidates if conversation else _candidates

    def visible(token: str) -> bool:
        if not scope:
            return True
        found = found_by(conn.dialect.name, [Word(token, token, 1)])
        return conn.execute(select(Ticket.pk).where(*scope, found).limit(1)).first() is not None

    # A caller limited to queues: which words its queues hold, asked for every word in
    # one statement, held elsewhere or not, so the time taken does not tell it which
    # words other queues hold (asking only for words held somewhere did: issue 32).
    in_scope = _held_in_scope(conn, found_by, scope, tokens) if scope else None

    def held(token: str) -> bool:
        return counts.get(token, 0) > 0 and (in_scope is None or token in in_scope)

    corrections = MAX_CORRECTIONS
    searched: set[frozenset[tuple[str, ...]]] = set()
    room = MAX_QUERY_FORMS - len(terms)  # other forms, for the first words that have them
    for term in terms:
        # each form held, its tokens rarest first (best-first reads a form by its first)
        forms = tuple(
            dict.fromkeys(
                tuple(sorted(form, key=lambda t: (counts[t], t)))
                for form in term.forms
                if all(map(held, form))
            )
        )[: 1 + max(0, min(MAX_FORMS - 1, room))]
        room -= len(forms) - 1
        if forms:
            if frozenset(forms) in searched:  # `login` and `log in` in one query
                continue
            searched.add(frozenset(forms))
            weights = tuple(idf_weight(total, min(counts[t] for t in form)) for form in forms)
            own_held = all(map(held, term.forms[0]))
            if own_held:  # the words as typed come first, others equal
                own = weights[0]
                weights = (own, *(max(1, min(w, own * OTHER_FORM // 100)) for w in weights[1:]))
            kept = {frozenset(form) for form in forms} - {frozenset(term.forms[0])}
            also = tuple(  # the synonyms searched, of those that add another form
                entry
                for entry, entry_forms in term.also
                if any(frozenset(form) in kept for form in entry_forms)
            )
            several = len(forms) > 1
            query.words.append(
                Word(
                    forms[0][0],
                    term.typed,
                    weights[0],
                    forms=forms if several else (),
                    weights=weights if several else (),
                    also=also,
                    as_typed=own_held,
                )
            )
            continue
        token, typed = term.token, term.typed
        # A word held only outside the scope is treated as one held nowhere.
        candidates = spelling_candidates(typed) if corrections > 0 else {}
        candidates.pop(token, None)
        corrections -= 1
        near_counts = _counts(conversation, sorted(candidates))
        near = (
            conn.execute(
                select(near_counts.c.term, near_counts.c.holding)
                .where(near_counts.c.holding > 0)
                .order_by(near_counts.c.holding.desc(), near_counts.c.term)
                .limit(MAX_NEIGHBOURS if scope else 1)
            ).all()
            if candidates
            else []
        )
        best = next((n for n in near if visible(n.term)), None)
        if best is not None and best.term not in tokens:
            query.words.append(
                Word(
                    best.term, typed, idf_weight(total, best.holding), instead=candidates[best.term]
                )
            )
        else:
            query.missing.append(Word(token, typed, 0))
    return query


def _held_in_scope(
    conn: Connection,
    held: Callable[[str, Sequence[Word]], ColumnElement[bool]],
    scope: Sequence[ColumnElement[bool]],
    tokens: Sequence[str],
) -> set[str]:
    """The ``tokens`` some ticket within ``scope`` holds (``held``: in its text, or also
    in a comment), in one statement of one EXISTS per token."""
    dialect = conn.dialect.name
    checks = [
        exists(select(Ticket.pk).where(*scope, held(dialect, [Word(t, t, 1)]))).label(f"w{i}")
        for i, t in enumerate(tokens)
    ]
    row = conn.execute(select(*checks)).one()
    return {t for t, hit in zip(tokens, row) if hit}


def _has(dialect: str, column_: Any, token: str | ColumnElement[str]) -> ColumnElement[bool]:
    """Whether ``column_`` (search text: tokens between spaces) holds ``token`` (a
    token, or a parameter holding it as `` token ``)."""
    # instr/strpos: a plain substring test, cheaper than LIKE; the same answer on both.
    find = func.instr if dialect == "sqlite" else func.strpos
    return find(column_, f" {token} " if isinstance(token, str) else token) > 0


def _tsquery(query: Sequence[Word] | ColumnElement[str], every: bool = False) -> Any:
    """``query`` (words, or a parameter holding ``_match_text``) as a PostgreSQL tsquery."""
    from sqlalchemy.dialects.postgresql import (
        TSQUERY,
    )  # only where PostgreSQL is in use (see count_terms)

    return cast(
        literal(_match_text("postgresql", query, every)) if isinstance(query, Sequence) else query,
        TSQUERY,
    )


def _fts_match(query: Sequence[Word] | ColumnElement[str], every: bool = False) -> Any:
    """``query`` (words, or a parameter holding ``_match_text``) as an FTS5 query."""
    return _match_text("sqlite", query, every) if isinstance(query, Sequence) else query


def _match_text(dialect: str, words: Sequence[Word], every: bool = False) -> str:
    """The engine's full-text query of ``words``: any of them (``every``: all), a word
    held by any of its forms, a form by all of its tokens."""
    both, either = _OPERATORS[dialect == "sqlite"]
    held = [_grouped([_form_text(dialect, form) for form, _ in w.searched], either) for w in words]
    return (both if every else either).join(held)


_OPERATORS = {True: (" AND ", " OR "), False: (" & ", " | ")}  # SQLite's FTS5, or not


def _form_text(dialect: str, form: Sequence[str]) -> str:
    """The engine's full-text query of one form: all of its tokens (tokens hold no quotes)."""
    quote = '"{}"' if dialect == "sqlite" else "'{}'"
    return _grouped([quote.format(t) for t in form], _OPERATORS[dialect == "sqlite"][0])


def _grouped(parts: list[str], joined: str) -> str:
    return parts[0] if len(parts) == 1 else "(" + joined.join(parts) + ")"


def _candidates(dialect: str, words: Sequence[Word], every: bool = False) -> ColumnElement[bool]:
    """Tickets holding any of ``words`` (``every``: all of them), from the engine's
    full-text index."""
    if dialect == "sqlite":
        return Ticket.pk.in_(
            select(_fts.c.rowid).where(_FTS_TABLE.op("MATCH")(_fts_match(words, every)))
        )
    if dialect == "postgresql":
        return _VECTOR.op("@@")(_tsquery(words, every))
    raise NotImplementedError(f"full-text search is not implemented for {dialect}")


def _commented(dialect: str, words: Sequence[Word] | ColumnElement[str]) -> ColumnElement[bool]:
    """Tickets with a comment holding any of ``words`` (or the ``_match_text`` a
    parameter holds), from the comments' full-text index (an uncorrelated subquery: the
    engine evaluates it once)."""
    if dialect == "sqlite":
        found = _COMMENTS.c.pk.in_(
            select(_comments_fts.c.rowid).where(_COMMENTS_FTS_TABLE.op("MATCH")(_fts_match(words)))
        )
    elif dialect == "postgresql":
        found = _COMMENT_VECTOR.op("@@")(_tsquery(words))
    else:
        raise NotImplementedError(f"full-text search is not implemented for {dialect}")
    return Ticket.id.in_(select(_COMMENTS.c.ticket_id).where(found))


def _conversation_candidates(dialect: str, words: Sequence[Word]) -> ColumnElement[bool]:
    """Tickets holding any of ``words`` in their text or in a comment."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import ARRAY

        # `text @@ q OR id IN (subquery)` is planned as a scan of every ticket; with the
        # commented tickets' ids as one array (computed once), `id = ANY(array)` is an
        # index condition and the two sides are one bitmap OR of index scans.
        ids = select(func.array_agg(_COMMENTS.c.ticket_id)).where(
            _COMMENT_VECTOR.op("@@")(_tsquery(words))
        )
        # (cast: an array value, not the `= ANY (subquery)` form, which compares row by row)
        return or_(
            _candidates(dialect, words),
            Ticket.id == any_(cast(ids.scalar_subquery(), ARRAY(String))),
        )
    # SQLite answers the OR with one index lookup per side (a multi-index OR).
    return or_(_candidates(dialect, words), _commented(dialect, words))


def recency(sort: Sort) -> Any:
    """The ticket's time that breaks ties of rank: ``updated_at`` for ``sort="newest"``,
    else ``created_at``, which the search postings are ordered by. A write that changes
    no text (status, owner, a note) then writes no search row (issue 37)."""
    return Ticket.updated_at if sort == "newest" else Ticket.created_at


def sort_keys(
    dialect: str,
    words: Sequence[Word],
    sort: Sort,
    conversation: bool = False,
    every: bool = False,
) -> tuple[ColumnElement[bool] | None, list[Any]]:
    """(the candidates' condition, the sort key's columns, best first and all descending).

    With words the key starts with ``rank`` (``_rank``); ``every``: only the tickets
    holding every word are candidates (not with ``conversation``)."""
    if not words:
        return None, [Ticket.updated_at.label("recency"), Ticket.pk.label("pk")]
    rank = _rank(dialect, _shape(words), sort, conversation).params(
        rank_parameters(dialect, words, sort, conversation)
    )
    candidates = (
        _conversation_candidates(dialect, words)
        if conversation
        else _candidates(dialect, words, every)
    )
    return candidates, [rank.label("rank"), recency(sort).label("recency"), Ticket.pk.label("pk")]


def _impact_sums(conversation: bool) -> list[int]:
    """Every score a word can have in a ticket before its weight (its impact): the sums
    of the weights of the places holding it."""
    return sorted(
        {
            a + b + c
            for a in (0, SUBJECT_WEIGHT)
            for b in (0, BODY_WEIGHT)
            for c in ((0, COMMENT_WEIGHT) if conversation else (0,))
        }
        - {0}
    )


@lru_cache(maxsize=256)
def _rank(
    dialect: str, shape: tuple[tuple[int, ...], ...], sort: Sort, conversation: bool
) -> ColumnElement[int]:
    """The rank of a ticket for a query of words of this ``shape`` (``_shape``), with
    the words as parameters (``rank_parameters``): ``matched x MATCHED + score`` (see
    the module docstring; ``score`` is 0 for ``sort="newest"``), one integer, so each
    word is looked up once per ticket (a simple CASE evaluates its operand once). A word
    of several forms scores as its best form in the ticket (each form at its own
    weight). With ``conversation`` a form in any of the ticket's comments counts as
    well. Built once per shape: a search then pays neither for building the expression
    nor for SQLAlchemy's cache key of a new one."""
    # max(a, b) and min(a, b) are scalar in SQLite
    best, least = (func.max, func.min) if dialect == "sqlite" else (func.greatest, func.least)
    parts: list[ColumnElement[int]] = []
    for i, forms in enumerate(shape):
        found: list[ColumnElement[bool]] = []
        scores = []
        for f, size in enumerate(forms):
            tokens = [bindparam(f"rank_word{i}_{f}_{k}", type_=String) for k in range(size)]
            in_subject = [_has(dialect, Ticket.search_subject, t) for t in tokens]
            in_body = [_has(dialect, Ticket.search_body, t) for t in tokens]
            impacts = [
                case((s, SUBJECT_WEIGHT), else_=0) + case((b, BODY_WEIGHT), else_=0)
                for s, b in zip(in_subject, in_body)
            ]
            # a form of several tokens is held at the impact of its weakest token (so its
            # tickets are the intersections of its tokens' posting lists)
            where: ColumnElement[int] = impacts[0] if size == 1 else least(*impacts)
            found.append(and_(*(or_(s, b) for s, b in zip(in_subject, in_body))))
            if conversation:  # a comment holding this form
                comment = _commented(dialect, bindparam(f"rank_match{i}_{f}", type_=String))
                where = where + case((comment, COMMENT_WEIGHT), else_=0)
                found.append(comment)
            scores.append(
                case(
                    {
                        n: bindparam(f"rank_score{i}_{f}_{n}", type_=Integer)
                        for n in _impact_sums(conversation)
                    },
                    value=where,
                    else_=0,
                )
            )
        if sort == "newest":
            parts.append(case((or_(*dict.fromkeys(found)), MATCHED), else_=0))
        else:
            parts.append(scores[0] if len(scores) == 1 else best(*scores))
    return sum(parts[1:], parts[0])


def rank_parameters(
    dialect: str, words: Sequence[Word], sort: Sort, conversation: bool = False
) -> dict[str, Any]:
    """The parameters of ``_rank`` for ``words``."""
    values: dict[str, Any] = {}
    for i, w in enumerate(words):
        for f, (form, weight) in enumerate(w.searched):
            if conversation:
                values[f"rank_match{i}_{f}"] = _form_text(dialect, form)
            values.update({f"rank_word{i}_{f}_{k}": f" {t} " for k, t in enumerate(form)})
            if sort == "relevance":
                values.update(
                    {
                        f"rank_score{i}_{f}_{n}": MATCHED + n * weight
                        for n in _impact_sums(conversation)
                    }
                )
    return values


@lru_cache(maxsize=256)
def _by_key_statement(
    dialect: str, shape: tuple[tuple[int, ...], ...], names: tuple[str, ...], filters: SearchFilters
) -> Select[Any]:
    """The tickets' columns ``names`` and the relevance sort key over their own text
    (parameters from ``rank_parameters``) of the tickets whose keys are ``pks`` (an
    expanding parameter), among those ``filters`` leave."""
    keys: list[Label[Any]] = [
        _rank(dialect, shape, "relevance", False).label("rank"),
        recency("relevance").label("recency"),
        Ticket.pk.label("pk"),
    ]
    taken = {k.name for k in keys}
    return select(*(Ticket.__table__.c[n] for n in names if n not in taken), *keys).where(
        Ticket.pk.in_(bindparam("pks", expanding=True)), *filters.conditions()
    )


def _read_page(
    conn: Connection,
    dialect: str,
    columns: Sequence[Any],
    words: Sequence[Word],
    pks: Sequence[int],
) -> Sequence[Row[Any]]:
    """``columns`` and the relevance sort key of the tickets ``pks``, best first."""
    stmt = _by_key_statement(
        dialect, _shape(words), tuple(c.name for c in columns), SearchFilters()
    )
    rows = conn.execute(
        stmt, {**rank_parameters(dialect, words, "relevance"), "pks": list(pks)}
    ).all()
    return sorted(rows, key=lambda r: (r.rank, r.recency, r.pk), reverse=True)


def _after(keys: list[Any], values: list[Any]) -> ColumnElement[bool]:
    """Rows after ``values`` in the descending order of ``keys`` (a row-value ``<``)."""
    cond: ColumnElement[bool] = keys[-1] < values[-1]
    for key, value in zip(reversed(keys[:-1]), reversed(values[:-1])):
        cond = or_(key < value, and_(key == value, cond))
    return cond


def position_values(position: Position, ranked: bool) -> list[Any]:
    return (
        [position.rank, position.updated_at, position.pk]
        if ranked
        else [position.updated_at, position.pk]
    )


def build_page(
    dialect: str,
    columns: Sequence[Any],
    words: Sequence[Word],
    filters: SearchFilters,
    sort: Sort,
    after: Position | None,
    limit: int,
    conversation: bool = False,
    every: bool = False,
) -> Select[Any]:
    """``columns`` and the sort key (labelled ``rank``, ``recency``, ``pk``) of the
    next ``limit`` tickets after ``after``, in page order (``conversation``: comments
    are searched too; ``every``: only tickets holding every word)."""
    if sort == "due":
        return _due_page(dialect, columns, words, filters, after, limit, conversation)
    candidates, keys = sort_keys(dialect, words, sort, conversation, every)
    names = {k.name for k in keys}
    selected = [c for c in columns if c.name not in names]
    if candidates is None:  # newest first: straight down ix_tickets_updated_at
        stmt = select(*selected, *keys).where(*filters.conditions())
        sort_columns = [Ticket.updated_at, Ticket.pk]
    else:  # the rank is computed once per candidate, in the subquery
        ranked = (
            select(*selected, *keys).where(*filters.conditions(), candidates).subquery("ranked")
        )
        stmt = select(ranked)
        sort_columns = [ranked.c[k.name] for k in keys]
    if after is not None:
        stmt = stmt.where(_after(sort_columns, position_values(after, candidates is not None)))
    return stmt.order_by(*(c.desc() for c in sort_columns)).limit(limit)


def _due_page(
    dialect: str,
    columns: Sequence[Any],
    words: Sequence[Word],
    filters: SearchFilters,
    after: Position | None,
    limit: int,
    conversation: bool,
) -> Select[Any]:
    """``sort="due"``: ``columns`` of the next ``limit`` tickets after ``after`` with a
    next SLA due time, soonest first, then by key (``recency`` labels the due time, and
    there is no ``rank``); ``words`` select the tickets holding every one of them (any
    one, with ``conversation``)."""
    candidates, _ = sort_keys(dialect, words, "newest", conversation, every=not conversation)
    due, pk = Ticket.sla_due_at, Ticket.pk
    keys = {"recency", "pk"}
    stmt = select(
        *(c for c in columns if c.name not in keys), due.label("recency"), pk.label("pk")
    ).where(
        due.is_not(None),
        *filters.conditions(),
        *([candidates] if candidates is not None else []),
    )
    if after is not None:
        stmt = stmt.where(or_(due > after.updated_at, and_(due == after.updated_at, pk > after.pk)))
    return stmt.order_by(due, pk).limit(limit)


FIRST_BATCH, LAST_BATCH = 16, 4096  # postings read per word and round: doubling from the first
BEST_FIRST_BUDGET = 1024  # postings read best first before the tickets holding every word are tried
_EVALUATED = 2000  # tickets scored per statement


def best_first_applies(
    words: Sequence[Word],
    filters: SearchFilters,
    sort: Sort,
    conversation: bool,
    after: Position | None,
) -> bool:
    """Whether ``relevance_page`` answers this search: relevance order over the tickets'
    own text, filtered at most by scope, queue, status and priority (each leaves a good
    share of a word's holders, so reading them best first soon fills a page; an owner,
    customer or date filter may leave few, which the engines' own plan finds faster),
    after a position with a rank (a page after one found without words has none)."""
    return (
        bool(words)
        and sort == "relevance"
        and not conversation
        and (after is None or after.rank is not None)
        and filters.owner is None
        and filters.customer is None
        and filters.created_after is None
        and filters.updated_after is None
        and filters.updated_before is None
    )


@cache
def _postings_statement(after: bool) -> Select[Any]:
    """The first ``n`` postings of ``term``, best first (``after``: after ``impact``,
    ``at``, ``pk``)."""
    p = _POSTINGS.c
    stmt = select(p.impact, p.created_at, p.ticket_pk).where(p.term == bindparam("term"))
    if after:
        stmt = stmt.where(
            tuple_(p.impact, p.created_at, p.ticket_pk)
            < tuple_(
                bindparam("impact", type_=p.impact.type),
                bindparam("at", type_=p.created_at.type),
                bindparam("pk", type_=p.ticket_pk.type),
            )
        )
    return stmt.order_by(p.impact.desc(), p.created_at.desc(), p.ticket_pk.desc()).limit(
        bindparam("n")
    )


@dataclass
class _Holders:
    """The postings of a form of a word, read best first (impact, then newest) in
    batches: of its token, or of the first token of a form of several (which holds
    every ticket holding the form, each at an impact at least the form's)."""

    token: str
    weight: int
    last: tuple[int, datetime, int] | None = None
    done: bool = False

    def bound(self) -> tuple[int, datetime, int]:
        """The best score in this word, then (``created_at``, key), of a ticket not yet read
        on this list (call once read from)."""
        assert self.last is not None
        return (self.weight * self.last[0], *self.last[1:])

    def read(self, conn: Connection, n: int) -> Sequence[Row[Any]]:
        params = {"term": self.token, "n": n}
        if self.last is not None:
            params.update(zip(("impact", "at", "pk"), self.last))
        rows = conn.execute(_postings_statement(self.last is not None), params).all()
        self.done = len(rows) < n
        if rows:
            self.last = (rows[-1].impact, rows[-1].created_at, rows[-1].ticket_pk)
        return rows


def relevance_page(
    conn: Connection,
    dialect: str,
    columns: Sequence[Any],
    words: Sequence[Word],
    filters: SearchFilters,
    after: Position | None,
    limit: int,
    budget: int | None = None,
) -> Sequence[Row[Any]]:
    """The rows ``build_page`` returns for a relevance search (``best_first_applies``),
    by the cheapest of four ways that give them, tried in turn:
    1. ``every_word_page`` (two words or more) while it reads at most ``budget``
       postings of its smallest lists: the tickets holding every word, one group of
       impacts at a time, when they fill the page;
    2. ``best_first_page`` while it reads at most ``budget`` postings: a page
       near the top of the words' postings (one word, a frequent word);
    3. the page among the tickets holding every word (the engine's full-text AND, each
       scored), when that fills it: it is then the page, since a ticket holding every
       word ranks above any holding fewer (``MATCHED``); its cost follows how many
       tickets hold every word;
    4. ``build_page`` itself (every holder scored, in one statement): the page needs
       tickets holding fewer words, which the others cannot bound (reading best first
       to the end scores each ticket at a random place in the table, several times the
       cost per ticket, and a caller limited to a small queue reads most of them in vain).
    ``budget`` None: each plan's own (``EVERY_WORD_BUDGET``, ``BEST_FIRST_BUDGET``); 0
    leaves plans 1 and 2 out."""
    rows = every_word_page(
        conn,
        dialect,
        columns,
        words,
        filters,
        after,
        limit,
        # other forms of a word bring lists of their own: twice the budget for them
        budget=EVERY_WORD_BUDGET * (2 if any(len(w.searched) > 1 for w in words) else 1)
        if budget is None
        else budget,
    )
    if rows is not None:
        return rows
    rows = best_first_page(
        conn,
        dialect,
        columns,
        words,
        filters,
        after,
        limit,
        budget=BEST_FIRST_BUDGET if budget is None else budget,
    )
    if rows is not None:
        return rows
    if len(words) > 1:
        rows = conn.execute(
            build_page(dialect, columns, words, filters, "relevance", after, limit, every=True)
        ).all()
        if len(rows) == limit:
            return rows
    return conn.execute(
        build_page(dialect, columns, words, filters, "relevance", after, limit)
    ).all()


EVERY_WORD_BUDGET = (
    16_384  # postings read from the smallest lists of a search of the tickets holding every word
)
# groups of impacts a search of the tickets holding every word may have (7 words, or words
# of several forms, each anywhere; each group is read only while the page is not full)
_GROUPS = 3**7
MERGE_RATIO = (
    6  # SQLite merges long lists that hold at most this many times the postings of the smallest
)
_SIZED = 1024  # postings counted per list (newest first) before a search of the tickets holding every word starts
_STORED_IMPACTS = (
    SUBJECT_WEIGHT + BODY_WEIGHT,
    SUBJECT_WEIGHT,
    BODY_WEIGHT,
)  # a posting's impact, highest first
_DRIVE = _POSTINGS.alias("drive")


@cache
def _sizes_statement(lists: int, oldest: bool) -> Any:
    """How many postings each of ``lists`` (token, impact) lists holds, counted up to
    ``cap``, and (``oldest``) the ``created_at`` of its ``cap``-th newest posting, None
    when it holds fewer (parameters t0, i0, t1, i1, ..., cap and last = cap - 1; rows
    (list index, count[, oldest]))."""
    p = _POSTINGS.c

    def held(n: int) -> Any:
        return and_(p.term == bindparam(f"t{n}"), p.impact == bindparam(f"i{n}"))

    return union_all(
        *(
            select(
                literal(n).label("n"),
                select(func.count())
                .select_from(select(p.ticket_pk).where(held(n)).limit(bindparam("cap")).subquery())
                .scalar_subquery(),
                *(
                    [
                        select(p.created_at)
                        .where(held(n))
                        .order_by(p.created_at.desc(), p.ticket_pk.desc())
                        .offset(bindparam("last"))
                        .limit(1)
                        .scalar_subquery()
                    ]
                    if oldest
                    else []
                ),
            )
            for n in range(lists)
        )
    )


def _looked_up(subquery: Select[Any]) -> ColumnElement[bool]:
    """EXISTS (``subquery`` OFFSET 0): evaluated for each row in the order the rows are
    read, as SQLite does anyway. PostgreSQL otherwise turns an EXISTS into a join,
    planned from estimates of how many postings a (token, impact) list holds, and may
    read the whole of a long list to merge it; it leaves a subquery with an OFFSET as
    it is (``simplify_EXISTS_query`` in its planner, src/backend/optimizer/plan/subselect.c)."""
    return subquery.offset(0).exists()


@cache
def _group_statement(lists: int, after: bool, since: bool) -> Select[Any]:
    """The newest ``limit`` tickets on each of ``lists`` (token, impact) lists: the
    first read newest first, the others looked up by primary key (parameters t0, i0,
    t1, i1, ... and limit; ``after``: older than (at, pk) only; ``since``: the first
    list read back to ``created_at`` ``since`` only)."""
    drive = _DRIVE.c
    stmt = select(drive.created_at, drive.ticket_pk).where(
        drive.term == bindparam("t0"), drive.impact == bindparam("i0")
    )
    for n in range(1, lists):
        probe = _POSTINGS.alias(f"probe{n}").c
        stmt = stmt.where(
            _looked_up(
                select(probe.ticket_pk).where(
                    probe.term == bindparam(f"t{n}"),
                    probe.impact == bindparam(f"i{n}"),
                    probe.created_at == drive.created_at,
                    probe.ticket_pk == drive.ticket_pk,
                )
            )
        )
    if after:
        stmt = stmt.where(
            tuple_(drive.created_at, drive.ticket_pk)
            < tuple_(
                bindparam("at", type_=drive.created_at.type),
                bindparam("pk", type_=drive.ticket_pk.type),
            )
        )
    if since:
        stmt = stmt.where(drive.created_at >= bindparam("since", type_=drive.created_at.type))
    return stmt.order_by(drive.created_at.desc(), drive.ticket_pk.desc()).limit(bindparam("limit"))


@cache
def _join_statement(lists: int, after: bool) -> Select[Any]:
    """``_group_statement`` as a join of the lists on (``created_at``, key), for
    PostgreSQL, whose planner picks the join with its default settings (at 1M they
    serve the target: bench/ANALYSIS.md, issue 37); parameters as there."""
    drive = _DRIVE.c
    stmt = select(drive.created_at, drive.ticket_pk).where(
        drive.term == bindparam("t0"), drive.impact == bindparam("i0")
    )
    for n in range(1, lists):
        other = _POSTINGS.alias(f"other{n}").c
        stmt = stmt.join_from(
            _DRIVE,
            other.term.table,
            and_(
                other.term == bindparam(f"t{n}"),
                other.impact == bindparam(f"i{n}"),
                other.created_at == drive.created_at,
                other.ticket_pk == drive.ticket_pk,
            ),
        )
    if after:
        stmt = stmt.where(
            tuple_(drive.created_at, drive.ticket_pk)
            < tuple_(
                bindparam("at", type_=drive.created_at.type),
                bindparam("pk", type_=drive.ticket_pk.type),
            )
        )
    return stmt.order_by(drive.created_at.desc(), drive.ticket_pk.desc()).limit(bindparam("limit"))


@lru_cache(maxsize=256)
def _intersect_statement(lists: int, after: bool, filters: SearchFilters) -> Any:
    """``_group_statement`` as an INTERSECT of the lists, ordered, for SQLite to merge
    (its query plan "MERGE (INTERSECT)": each list read newest first side by side, as
    far as the page lies, a merged posting costing several times less than a lookup); the
    tickets ``filters`` leave only; parameters as there."""
    conditions = filters.conditions()

    def arm(n: int) -> Select[Any]:
        p = _DRIVE.c if n == 0 else _POSTINGS.alias(f"other{n}").c
        stmt = select(p.created_at, p.ticket_pk).where(
            p.term == bindparam(f"t{n}"), p.impact == bindparam(f"i{n}")
        )
        if after:
            stmt = stmt.where(
                tuple_(p.created_at, p.ticket_pk)
                < tuple_(
                    bindparam("at", type_=p.created_at.type),
                    bindparam("pk", type_=p.ticket_pk.type),
                )
            )
        if n == 0 and conditions:
            stmt = stmt.where(
                _looked_up(select(Ticket.pk).where(Ticket.pk == p.ticket_pk, *conditions))
            )
        return stmt

    return (
        intersect(*(arm(n) for n in range(lists)))
        .order_by(literal_column("created_at").desc(), literal_column("ticket_pk").desc())
        .limit(bindparam("limit"))
    )


def _list_sizes(
    conn: Connection,
    lists: Sequence[tuple[str, int]],
    cap: int,
    oldest: bool = False,
) -> dict[tuple[str, int], tuple[int, datetime | None]]:
    """How many postings each (token, impact) list holds, counted up to ``cap`` (a count
    of ``cap`` means at least that many), and (``oldest``) the ``created_at`` of its
    ``cap``-th newest posting (None when it holds fewer, or without ``oldest``)."""
    params = {f"{name}{n}": value for n, key in enumerate(lists) for name, value in zip("ti", key)}
    rows = conn.execute(
        _sizes_statement(len(lists), oldest), {**params, "cap": cap, "last": cap - 1}
    )
    return {lists[n]: (size, at[0] if at else None) for n, size, *at in rows}


def every_word_page(
    conn: Connection,
    dialect: str,
    columns: Sequence[Any],
    words: Sequence[Word],
    filters: SearchFilters,
    after: Position | None,
    limit: int,
    budget: int = EVERY_WORD_BUDGET,
    first: int = _SIZED,
) -> Sequence[Row[Any]] | None:
    """The rows ``build_page`` returns for a relevance search (``best_first_applies``)
    of two words or more, when the tickets holding every word fill the page; None when
    they do not (the page then needs tickets holding fewer words) or when finding them
    would read more than ``budget`` postings.

    A ticket holding every word ranks by its score, the sum of each word's weight x its
    impact in the ticket. So the tickets holding every word fall into one group per
    combination of impacts (at most 3 per word), whose score is known before any ticket
    is read; groups are searched highest score first until the page is full and no
    group left can score as high. A group is the intersection of one stored list of
    postings per word (the word at that impact), each ordered newest first: the
    smallest list is read in that order and every other list is looked up by its
    primary key, so a group's page costs how far down its smallest list the page lies,
    at most that list's length. Lists are counted up to ``first`` postings first; when
    a group's lists are all longer, SQLite first reads them back only as far as those
    counted postings reach, then counts them up to the budget and reads the group
    again, merging the lists (``_intersect_statement``) when together they hold at most
    ``MERGE_RATIO`` times the smallest, else looking the smallest up; PostgreSQL joins them
    (``_join_statement``, not bounded by the budget). This is score-at-a-time evaluation
    of an impact-ordered index (Anh and Moffat, "Pruned query evaluation using
    pre-computed impacts", SIGIR 2006), exact here: every group scoring above the page's
    end is read to its end. The page is checked against the tickets' rows and the same
    SQL rank as ``build_page``: a posting an older server left behind (see
    ``post_unposted_tickets``) gives None."""
    if (
        len(words) < 2
        or (after is not None and (after.rank is None or after.rank < len(words) * MATCHED))
        or math.prod(sum(3 ** len(form) for form, _ in w.searched) for w in words) > _GROUPS
    ):
        return None
    counted = _list_sizes(
        conn,
        [
            (t, impact)
            for t in dict.fromkeys(t for w in words for t in w.tokens)
            for impact in _STORED_IMPACTS
        ],
        first,
        oldest=dialect != "postgresql",
    )  # PostgreSQL joins long lists instead
    sizes = {key: size for key, (size, _) in counted.items()}
    # Each word's choices, (its lists, its score): each form at each impact; a form of
    # several tokens at each combination of its tokens' impacts (held at its weakest).
    choices = [
        [
            (tuple(zip(form, impacts)), weight * min(impacts))
            for form, weight in w.searched
            for impacts in product(_STORED_IMPACTS, repeat=len(form))
            if all(sizes[key] for key in zip(form, impacts))
        ]
        for w in words
    ]
    if math.prod(map(len, choices)) > _GROUPS:
        return None
    # A ticket holding a word by several forms is in a group for each: the first read
    # (its best, as the rank scores it) is kept.
    groups = sorted(
        (
            (sum(score for _, score in chosen), [key for lists, _ in chosen for key in lists])
            for chosen in product(*choices)
        ),
        reverse=True,
    )
    # the score of the last page's end (``after.rank`` is set: see the test above)
    skip = None if after is None or after.rank is None else after.rank - len(words) * MATCHED
    conditions = filters.conditions()
    found: list[tuple[int, datetime, int]] = []
    spent = 0

    def newest(
        lists: list[tuple[str, int]],
        score: int,
        since: datetime | None = None,
        merge: bool = False,
    ) -> Sequence[Row[datetime, int]]:
        if merge and dialect != "postgresql":
            stmt = _intersect_statement(len(lists), skip is not None and score == skip, filters)
        else:
            if merge:
                stmt = _join_statement(len(lists), skip is not None and score == skip)
            else:
                stmt = _group_statement(
                    len(lists), skip is not None and score == skip, since is not None
                )
            if conditions:
                stmt = stmt.where(
                    _looked_up(
                        select(Ticket.pk).where(Ticket.pk == _DRIVE.c.ticket_pk, *conditions)
                    )
                )
        params: dict[str, Any] = {
            f"{name}{n}": value for n, key in enumerate(lists) for name, value in zip("ti", key)
        }
        if after is not None and skip is not None and score == skip:
            params.update(at=after.updated_at, pk=after.pk)
        if since is not None:
            params["since"] = since
        params["limit"] = limit
        return conn.execute(stmt, params).all()

    for index, (score, impacts) in enumerate(groups):
        if skip is not None and score > skip:
            continue
        lists = sorted(dict.fromkeys(impacts), key=lambda key: sizes[key])
        rows: Sequence[Row[datetime, int]] = []
        if sizes[lists[0]] >= first and dialect == "postgresql":
            # Only long lists, on PostgreSQL: joined (``_join_statement``), each read as
            # far as the group's page lies, at most to its end.
            rows = newest(lists, score, merge=True)
        elif sizes[lists[0]] >= first:
            # Only long lists: their ``first`` newest postings (those counted) often hold
            # the group's page; else they are counted up to the budget left, and read to the end.
            # the one whose first postings go back furthest (every list here holds
            # ``first`` postings or more, so each has its oldest counted one)
            lists.sort(key=lambda key: counted[key][1] or datetime.max.replace(tzinfo=UTC))
            spent += first
            if spent > budget:
                return None
            rows = newest(lists, score, since=counted[lists[0]][1])
            uncounted = [key for key in lists if sizes[key] == first]
            cap = budget + 1
            if len(rows) < limit and uncounted:
                sizes.update(
                    {key: size for key, (size, _) in _list_sizes(conn, uncounted, cap).items()}
                )
            lists.sort(key=lambda key: sizes[key])
            if len(rows) < limit:
                spent += sizes[lists[0]]
                if spent > budget:
                    return None
                # Merged (``_intersect_statement``) when reading every list to its end costs
                # less than looking each posting of the smallest up in the others: a merged
                # posting costs several times less than a lookup.
                merge = all(sizes[key] < cap for key in lists) and (
                    sum(sizes[key] for key in lists) <= MERGE_RATIO * sizes[lists[0]]
                )
                rows = newest(lists, score, merge=merge)
        else:
            spent += sizes[lists[0]]
            if spent > budget:
                return None
            rows = newest(lists, score)
        kept: dict[int, tuple[int, datetime, int]] = {}
        for key in sorted(found + [(score, at, pk) for at, pk in rows], reverse=True):
            kept.setdefault(key[2], key)
        found = list(kept.values())[:limit]
        if len(found) == limit and (index + 1 == len(groups) or groups[index + 1][0] < score):
            break
    else:
        return None  # fewer tickets than the page hold every word
    page = _read_page(conn, dialect, columns, words, [pk for *_, pk in found])
    if [(r.rank, r.recency, r.pk) for r in page] != [
        (len(words) * MATCHED + s, at, pk) for s, at, pk in found
    ]:
        return None
    return page


def best_first_page(
    conn: Connection,
    dialect: str,
    columns: Sequence[Any],
    words: Sequence[Word],
    filters: SearchFilters,
    after: Position | None,
    limit: int,
    budget: int | None = None,
) -> Sequence[Row[Any]] | None:
    """The rows ``build_page`` returns for a relevance search (``best_first_applies``),
    found by reading each word's postings best first and stopping once no ticket not
    yet read can rank above the page: the threshold algorithm of Fagin, Lotem and Naor,
    "Optimal aggregation algorithms for middleware" (2003), with the rank as the
    aggregate. The bound is the rank of a ticket holding every word not read to the
    end, each at the impact read last, and no newer than the oldest last posting read.
    Each round reads a batch of every word's postings and scores the tickets first seen
    with the same SQL rank as ``build_page``, so the page is the same; its cost follows
    how deep the page lies in the postings, not how many tickets hold the words.
    ``after`` and ``limit`` as for ``build_page``; None once more than ``budget``
    postings were read without settling the page."""
    scored = _by_key_statement(dialect, _shape(words), (), filters)
    ranking = rank_parameters(dialect, words, "relevance")
    bound_after = None if after is None else (after.rank, after.updated_at, after.pk)
    holders = [[_Holders(form[0], weight) for form, weight in w.searched] for w in words]
    best: list[tuple[Any, ...]] = []
    seen: set[int] = set()
    batch = max(FIRST_BATCH, limit)
    read_so_far = 0
    while True:
        if budget is not None and read_so_far > budget:
            return None
        read = [
            pk for lists in holders for h in lists if not h.done for *_, pk in h.read(conn, batch)
        ]
        read_so_far += len(read)
        fresh = [
            pk for pk in dict.fromkeys(read) if pk not in seen
        ]  # a ticket may come in two words' batches
        seen.update(fresh)
        for start in range(0, len(fresh), _EVALUATED):
            rows = conn.execute(scored, {**ranking, "pks": fresh[start : start + _EVALUATED]})
            # a form of several tokens is read by its first: a ticket holding only that
            # token holds no word (rank 0)
            best.extend(
                k
                for k in map(tuple, rows)
                if k[0] >= MATCHED and (bound_after is None or k < bound_after)
            )
        best = sorted(best, reverse=True)[:limit]
        unread = [[h for h in lists if not h.done] for lists in holders]
        if not any(unread):
            break
        if len(best) == limit:
            # a ticket not yet read scores at most each word's best bound (a word of
            # several forms: its best form's), and is no newer than each bound's post
            bounds = [max(h.bound() for h in lists) for lists in unread if lists]
            rank = sum(MATCHED + score for score, *_ in bounds)
            newest = min(tuple(b[1:]) for b in bounds)
            if best[-1] >= (rank, *newest):
                break
        batch = min(2 * batch, LAST_BATCH)
    if not best:
        return []
    return _read_page(conn, dialect, columns, words, [k[2] for k in best])


def matched_in(
    conn: Connection, dialect: str, words: Sequence[Word], rows: Sequence[Any]
) -> dict[str, list[str]]:
    """Where the query's words were found in each ticket of ``rows`` (which hold ``id``,
    ``search_subject`` and ``search_body``): ``{ticket id: ["subject", "body", "comment"]}``,
    in that order, only the places holding a word. One read of the tickets' comments."""
    tokens = list(dict.fromkeys(t for w in words for t in w.tokens))
    ids = [r._mapping["id"] for r in rows]
    commented: set[str] = set()
    if tokens and ids:
        commented = set(
            conn.execute(
                select(_COMMENTS.c.ticket_id)
                .distinct()
                .where(
                    _COMMENTS.c.ticket_id.in_(ids),
                    or_(*(_has(dialect, _COMMENTS.c.search_body, t) for t in tokens)),
                )
            ).scalars()
        )
    out: dict[str, list[str]] = {}
    for r in rows:
        m = r._mapping
        places = [
            name
            for name, text in (("subject", m["search_subject"]), ("body", m["search_body"]))
            if any(all(f" {t} " in text for t in form) for w in words for form, _ in w.searched)
        ]
        out[m["id"]] = places + (["comment"] if m["id"] in commented else [])
    return out


def row_position(row: Any) -> Position:
    m = row._mapping
    return Position(updated_at=m["recency"], pk=m["pk"], rank=m.get("rank"))
