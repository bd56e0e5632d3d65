"""The one text analyzer of ticket search, the same for SQLite and PostgreSQL.

Tickets are analyzed here when they are written (``index_tokens``), and the engines index
the resulting tokens with a trivial tokenizer; a query is analyzed by the same rules
(``query_terms``, which also gives each word its other forms: compounds apart or solid,
synonyms), so both engines see identical tokens. The rules:

- Unicode folding: NFKD, combining marks dropped, ``casefold`` (``Straße`` ->
  ``strasse``, ``Łódź`` -> ``lodz``, ``São`` -> ``sao``); apostrophes dropped
  (``can't`` -> ``cant``).
- A *chunk* is a run of letters and digits joined by ``- _ . / : @`` (``e-mail``,
  ``INV-20931``, ``req_dc6affc60c81``, ``203.0.113.4``, ``/v2/users/bulk``).
- A plain word is stemmed with the Snowball English stemmer (PyStemmer) unless it is a
  stop word.
- A chunk of letters only (``e-mail``, ``double-charged``) is also one word, joined and
  stemmed (``email``, ``doublecharg``); an *identifier* (a chunk with a digit or an
  underscore) is kept whole, lower-cased and joined by ``_`` (``inv_20931``).
  Documents index the whole chunk and each of its parts (as plain words), so
  ``INV-20931``, ``20931`` and ``INV 20931`` all find the ticket; a query keeps a chunk
  whole.

Tokens contain only letters, digits and ``_``, never spaces or quotes. This module
imports nothing but PyStemmer and the standard library.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import Stemmer

MAX_WORDS = 16
MAX_TOKEN_LENGTH = 64

# Snowball's English stop word list (snowballstem.org/algorithms/english/stop.txt)
# without the negated contractions, which carry meaning in a support ticket
# ("can't log in"), and with the apostrophes dropped as the analyzer drops them (less the
# contractions that would then read as another word: "we'll", "I'd", "she'd", "let's").
STOP_WORDS = frozenset(
    """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves what which who whom
this that these those am is are was were be been being have has had having do does did
doing would should could ought im youre theyre ive youve weve theyve youd theyd youll
theyll thats whos whats heres theres whens wheres whys hows a an the and but if or because as until while of at by for
with about against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very
""".split()
)

# Letters that NFKD does not decompose into a base letter and a mark.
_FOLD = str.maketrans(
    {"ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "æ": "ae", "œ": "oe", "ı": "i"}
)
_APOSTROPHES = re.compile(r"['\u2019\u02bc]")
_CHUNK = re.compile(r"\w+(?:[-_./:@]\w+)*")
_PART = re.compile(r"[^\W_]+")
_DIGIT = re.compile(r"\d")
_local = threading.local()  # a PyStemmer Stemmer is not safe to share between threads


def _stem(word: str) -> str:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    stem: str = stemmer.stemWord(word)
    return stem


def fold(text: str) -> str:
    """``text`` case- and accent-folded, apostrophes removed."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _APOSTROPHES.sub("", bare.casefold().translate(_FOLD))


def _word(part: str) -> str | None:
    """A plain word's token: its stem, or None for a stop word or a single letter."""
    if part in STOP_WORDS or (len(part) == 1 and not part.isdigit()):
        return None
    return _stem(part)[:MAX_TOKEN_LENGTH]


def _chunk(chunk: str) -> tuple[str | None, list[str]]:
    """(the chunk's whole token, or None for a plain word; the tokens of its parts)."""
    parts = _PART.findall(chunk)
    if len(parts) == 1 and "_" not in chunk:
        token = _word(parts[0])
        return None, [token] if token else []
    tokens = [t for t in map(_word, parts) if t]
    if "_" in chunk or _DIGIT.search(chunk):
        return "_".join(parts)[:MAX_TOKEN_LENGTH], tokens
    return _stem("".join(parts))[:MAX_TOKEN_LENGTH], tokens


def index_tokens(text: str) -> list[str]:
    """The distinct tokens ``text`` is found by, in order of first appearance."""
    out: dict[str, None] = {}
    for chunk in _CHUNK.findall(fold(text)):
        whole, parts = _chunk(chunk)
        if whole:
            out[whole] = None
        out.update(dict.fromkeys(parts))
    return list(out)


def query_words(query: str, limit: int | None = MAX_WORDS) -> list[tuple[str, str]]:
    """The distinct words of a query as ``(token, as typed)``: the first ``limit`` (None:
    all); stop words left out; a chunk (``e-mail``, ``INV-20931``) is one word."""
    out: dict[str, str] = {}
    for chunk in _CHUNK.findall(fold(query)):
        whole, parts = _chunk(chunk)
        # `subject:invoice` is search-engine field syntax a model may type: words, not
        # one joined word (an identifier keeps its colon: `10:30`, `a1:b2`).
        field_syntax = ":" in chunk and not _DIGIT.search(chunk) and "_" not in chunk
        tokens = [whole] if whole and not field_syntax else parts
        for token in tokens:
            out.setdefault(token, chunk)
    return list(out.items())[:limit]


def has_words(text: str) -> bool:
    """Whether ``text`` holds any letter or digit (else it is an empty query)."""
    return bool(_PART.search(fold(text)))


def stop_words_in(query: str) -> list[str]:
    """The stop words of ``query`` that were left out of it."""
    return [w for w in _PART.findall(fold(query)) if w in STOP_WORDS]


def one_letter_words_in(query: str) -> list[str]:
    """The one-letter words of ``query`` left out of it, as typed (``x``, ``é``; not a
    digit, not a stop word like ``a``, not the part of a compound, which is searched
    whole: ``e-mail``)."""
    out: dict[str, str] = {}  # folded: as typed first
    # As ``fold`` drops them: a mark no letter composes with does not split a word.
    composed = unicodedata.normalize("NFC", query)
    bare = "".join(c for c in composed if not unicodedata.combining(c))
    for chunk in _CHUNK.findall(_APOSTROPHES.sub("", bare)):
        parts = _PART.findall(chunk)
        field_syntax = ":" in chunk and not _DIGIT.search(chunk) and "_" not in chunk
        if field_syntax or (len(parts) == 1 and "_" not in chunk):
            for part in parts:
                folded = fold(part)
                if len(folded) == 1 and folded not in STOP_WORDS and not _word(folded):
                    out.setdefault(folded, part)
    return list(out.values())


def one_edit_away(word: str) -> set[str]:
    """Every string one letter away from ``word`` (delete, swap, replace, insert of
    a-z): the candidates for a typo of one letter."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in letters}
    inserts = {a + c + b for a, b in splits for c in letters}
    return (deletes | swaps | replaces | inserts) - {word}


def spelling_candidates(typed: str) -> dict[str, str]:
    """For a query word that no ticket contains: ``{token: word}`` for every word one
    letter away from ``typed`` (a plain word of 4 to 24 letters; else empty)."""
    if not (4 <= len(typed) <= 24 and typed.isalpha() and typed.isascii()):
        return {}
    out: dict[str, str] = {}
    for candidate in sorted(one_edit_away(typed)):
        token = _word(candidate)
        if token:
            out.setdefault(token, candidate)
    return out


def search_text(tokens: list[str]) -> str:
    """Tokens as stored for the engines: separated and surrounded by one space, so that
    ``' token '`` is a substring exactly when the token is present."""
    return " " + " ".join(tokens) + " " if tokens else " "


# -- query words with their other forms (issue 37) ----------------------------------

MAX_FORMS = 8  # forms of one query word searched, its own first (those some ticket holds)
_SEGMENTS = re.compile(r"[^\W\d_]+|\d+")
_NUMBERS = re.compile(r"[\d\W_]+")  # an IP address, a time, a version: no letter


@dataclass(frozen=True)
class QueryWord:
    """A query word as searched: ``forms`` are the token sets a ticket may hold it by,
    its own first, each a conjunction of tokens (``("auto", "renew")`` is held by a
    ticket holding both); ``typed`` is the text of the query it stands for; ``also`` the
    synonyms whose forms were added: (as written in the list, their forms)."""

    typed: str
    forms: tuple[tuple[str, ...], ...]
    also: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = ()

    @property
    def token(self) -> str:
        return self.forms[0][0]


@dataclass(frozen=True)
class Phrase:
    """A synonym list entry: its chunks' keys (``_key``), whether it holds a stop word,
    the forms it adds to a query holding another entry of its group, and its text.
    ``own``: the forms of the entry when a query holds it (its words as typed).
    ``units``: the keys it is matched by, a compound's parts apart (``_units``), so
    that ``sign-in`` in a query matches the entry ``sign in`` and the other way round."""

    keys: tuple[str, ...]
    has_stop: bool
    forms: tuple[tuple[str, ...], ...]
    own: tuple[tuple[str, ...], ...]
    text: str
    units: tuple[str, ...]


@dataclass(frozen=True)
class Synonyms:
    """Groups of synonym entries (``phrase``): ``starting`` holds each entry with its
    group under the entry's first unit key (``Phrase.units``), longest entries first
    (``query_terms`` looks entries up at each chunk)."""

    starting: dict[str, tuple[tuple[Phrase, tuple[Phrase, ...]], ...]]

    @classmethod
    def of(cls, groups: Iterable[Iterable[Phrase]]) -> Synonyms:
        starting: dict[str, list[tuple[Phrase, tuple[Phrase, ...]]]] = {}
        for group in map(tuple, groups):
            for entry in group:
                starting.setdefault(entry.units[0], []).append((entry, group))
        return cls(
            {k: tuple(sorted(v, key=lambda e: -len(e[0].units))) for k, v in starting.items()}
        )


def _key(chunk: str) -> str:
    """A chunk compared with a synonym's: each of its letter and digit runs stemmed."""
    return "_".join(_stem(p) for p in _PART.findall(chunk))


def _units(chunk: str) -> list[str]:
    """The words a chunk is matched with a synonym entry by: a compound's parts apart
    (``sign-in``: ``sign``, ``in``; ``two-factor``: ``two``, ``factor``), as the same
    words written apart are; an identifier with ``_``, a chunk without a letter and
    field syntax (``subject:login``) stay whole."""
    parts = _PART.findall(chunk)
    if "_" in chunk or _NUMBERS.fullmatch(chunk) or (":" in chunk and not _DIGIT.search(chunk)):
        return [chunk]
    return parts


def _chunk_forms(chunk: str) -> list[QueryWord]:
    """The query words of one chunk with the other forms of a compound: a hyphenated or
    joined chunk is also found with its parts apart (``auto-renewal``: ``auto`` and
    ``renew``; ``soc2``: ``soc`` and ``2``) and written solid (``soc-2``: ``soc2``). A
    chunk without a letter (an IP address, a time) is searched whole only: its numbers
    apart would find other addresses."""
    whole, parts = _chunk(chunk)
    # `subject:invoice` is search-engine field syntax a model may type: words, not
    # one joined word (an identifier keeps its colon: `10:30`, `a1:b2`).
    field_syntax = ":" in chunk and not _DIGIT.search(chunk) and "_" not in chunk
    if not whole or field_syntax:
        tokens = parts
        if whole is None and len(tokens) == 1:  # one part: `soc2`, `2fa` apart
            segments = _SEGMENTS.findall(chunk)
            apart = [t for t in map(_word, segments) if t]
            if len(segments) == 2 and len(apart) == 2:
                return [QueryWord(chunk, ((tokens[0],), tuple(apart)))]
        return [QueryWord(chunk, ((t,),)) for t in tokens]
    if _NUMBERS.fullmatch(chunk):
        return [QueryWord(chunk, ((whole,),))]
    raw = _PART.findall(chunk)
    forms: list[tuple[str, ...]] = [(whole,)]
    if len(parts) == len(raw) >= 2:
        forms.append(tuple(parts))
    solid = _word("".join(raw))
    if solid and len(raw) >= 2:
        forms.append((solid,))
    return [QueryWord(chunk, tuple(dict.fromkeys(forms)))]


def _solid(first: str, second: str) -> list[tuple[str, ...]]:
    """Two neighbouring chunks of letters or digits written as one word (``auto
    renewal``: ``autorenew``; ``log in``: ``login``; ``locked out``: ``lockout`` too)."""
    if not (_PART.fullmatch(first) and _PART.fullmatch(second)):
        return []
    joined = [_word(first + second)]
    if second in STOP_WORDS:  # a verb and its particle: `locked out`, `logged in`
        joined.append(_word(_stem(first) + second))
    return [(t,) for t in dict.fromkeys(joined) if t]


def phrase(text: str) -> Phrase | None:
    """A synonym list entry analyzed (None when it holds no word that is searched)."""
    chunks = _CHUNK.findall(fold(text))
    words = [w for c in chunks for w in _chunk_forms(c)]
    if not words:
        return None
    stop = any(c in STOP_WORDS for c in chunks)
    solid = _solid(*chunks) if len(chunks) == 2 else []
    # As typed: one word's forms, or all of its words, and two chunks written solid.
    own = words[0].forms if len(words) == 1 else (tuple(dict.fromkeys(w.token for w in words)),)
    own = _distinct([*solid, *own] if stop else [*own, *solid])
    # Added to a query holding another entry: a word's whole and solid forms, not its parts
    # apart anywhere in a ticket (`2-step` would find any ticket with `2` and `step`); a
    # phrase holding a stop word only written solid (`log in` left as `log` would add
    # every ticket on logs to `login`).
    if stop:
        forms = tuple(solid)
    elif len(words) == 1:
        forms = tuple(f for f in own if len(f) == 1)
    else:
        forms = own
    units = tuple(_stem(u) for c in chunks for u in _units(c))
    return Phrase(tuple(_key(c) for c in chunks), stop, forms, own, text, units)


def query_terms(query: str, synonyms: Synonyms | None = None) -> list[QueryWord]:
    """The distinct words of a query (all of them: the caller keeps the first
    ``MAX_WORDS``), stop words left out, each with the forms a ticket may hold it by:
    its own first, then a compound's other forms (``_chunk_forms``), two neighbouring
    chunks written solid (``_solid``: ``SOC 2``, ``soc2``), and the forms of the other
    entries of its ``synonyms`` group. A synonym of several chunks takes the words it
    covers as one (``money back``); one holding a stop word is searched first as written
    solid (``log in``: ``login``, then ``log``). Forms are candidates: the search keeps
    those some ticket holds."""
    chunks = _CHUNK.findall(fold(query))
    per_chunk = [_chunk_forms(c) for c in chunks]
    keys = [_key(c) for c in chunks]
    # two neighbouring chunks written solid, a form of the words of both
    extra: list[list[tuple[str, ...]]] = [[] for _ in chunks]
    for i in range(len(chunks) - 1):
        joined = _solid(chunks[i], chunks[i + 1])
        extra[i] += joined
        extra[i + 1] += joined
    # synonyms: the longest entry matching at each chunk, stop words passed over; the
    # query's compounds and the entries' are compared by their parts (`_units`), so
    # `sign-in` matches `sign in`; an entry matches whole chunks only
    units = [(u, c) for c, chunk in enumerate(chunks) for u in _units(chunk)]
    unit_words = [u for u, _ in units]
    unit_keys = [_stem(u) for u in unit_words]
    first = {c: n for n, (_, c) in reversed(list(enumerate(units)))}  # chunk -> its first unit
    chunk_at = {**{n: c for c, n in first.items()}, len(units): len(chunks)}
    covered: dict[int, tuple[int, Phrase, tuple[Phrase, ...], bool]] = {}
    starting = synonyms.starting if synonyms is not None else {}
    i = 0
    while i < len(chunks):
        found = []
        for entry, group in starting.get(unit_keys[first[i]], ()):
            end = _match(entry, unit_keys, unit_words, first[i])
            if end is not None and end in chunk_at:
                # an entry as written first among those as long (`two-factor`, `two factor`)
                exact = entry.keys == tuple(keys[i : chunk_at[end]])
                found.append((len(entry.units), exact, chunk_at[end], entry, group))
        if found:
            _, exact, end, entry, group = max(found, key=lambda f: f[:2])
            covered[i] = (end, entry, group, exact)
            i = end
        else:
            i += 1
    out: dict[tuple[str, ...], QueryWord] = {}
    i = 0
    while i < len(chunks):
        if i not in covered:
            for word in per_chunk[i]:
                distinct = _distinct([*word.forms, *extra[i]])
                out.setdefault(distinct[0], QueryWord(word.typed, distinct))
            i += 1
            continue
        end, entry, group, exact = covered[i]
        own = [w for c in per_chunk[i:end] for w in c]
        if len(own) == 1 and (not entry.has_stop or end == i + 1):  # `sign-in`: as `signin`
            forms = [*own[0].forms, *extra[i]]
        elif len(own) == 1:  # `log in`: written solid first, then its word (`log`)
            forms = [*entry.own, *own[0].forms]
        elif exact:
            forms = [*entry.own]
        else:  # as typed first (`2 step`: both words, then the entry's `2-step` whole)
            forms = [tuple(dict.fromkeys(w.token for w in own)), *entry.own]
        # the other entries (not those written as this one: `double charge`, `double charged`)
        others = [p for p in group if p.keys != entry.keys]
        forms += [f for p in others for f in p.forms]
        word = QueryWord(
            " ".join(chunks[i:end]), _distinct(forms), tuple((p.text, p.forms) for p in others)
        )
        out.setdefault(word.forms[0], word)
        i = end
    return list(out.values())


def _distinct(forms: Iterable[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    return tuple(dict.fromkeys(forms))


def _match(entry: Phrase, keys: Sequence[str], words: Sequence[str], start: int) -> int | None:
    """Where ``entry`` ends when it matches the query's words (``_units``; ``keys``:
    theirs stemmed) from ``start`` (its stop words in place; the query's other stop words
    passed over); None when it does not."""
    i = start
    for n, key in enumerate(entry.units):
        if n and not entry.has_stop:
            while i < len(words) and words[i] in STOP_WORDS and keys[i] != key:
                i += 1
        if i >= len(words) or keys[i] != key:
            return None
        i += 1
    return i
