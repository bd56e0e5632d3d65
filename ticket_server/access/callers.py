"""The callers registry: who may call the tools, with which scopes, on which queues,
how fast. Tokens are 32 random bytes (URL-safe base64), shown once; only their SHA-256
is stored, and a token is found by its hash, so no token is ever compared in a
data-dependent way (``hmac.compare_digest`` confirms the match).

SQLAlchemy, the table's model and `limits` are imported where a query or a check needs
them, not when the server is built."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from time import monotonic
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

    from ticket_server.access.models import CallerRow
    from ticket_server.settings import Settings

log = logging.getLogger(__name__)
R = TypeVar("R")

TOKEN_PREFIX = "tks_"
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
SCOPE = re.compile(r"^[a-z0-9_-]+:[a-z0-9_*-]+$")
QUEUE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
LOCAL = "local"
STORE_PAGE_CACHE_KIB = 256
"""SQLite page cache of each of the store's connections (``PRAGMA cache_size``)."""


class CallerError(Exception):
    """A registry command the user must change (duplicate or unknown name, bad value)."""


class RegistryUnavailable(Exception):
    """The callers table did not answer."""


def normalise_name(name: str) -> str:
    """A caller name as the callers table stores it: surrounding whitespace removed,
    lower case. Every lookup by name goes through this, so ``BILLING`` and ``"billing "``
    are the caller ``billing`` (and its revocation) everywhere."""
    return name.strip().lower()


def new_token() -> str:
    """32 random bytes, URL-safe base64, with a recognisable prefix (for secret scanners)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Caller:
    """A resolved caller. ``queues`` None means every queue. ``write_queues`` narrows
    where ``tickets:write`` applies (None: wherever it may read; see ``writable_queues``)."""

    name: str
    scopes: frozenset[str]
    queues: frozenset[str] | None = None
    tool_rate_limit: str | None = None
    http_rate_limit: str | None = None
    write_queues: frozenset[str] | None = None
    confirm_writes: frozenset[str] | None = None
    """The writes needing a person's confirmation for this caller (None: the deployment's)."""
    toolsets: frozenset[str] | None = None
    """The toolsets this caller is offered, in place of the deployment's (None: those)."""
    registered: bool = True
    """False for a JWT subject with no row of its own, served under the default role."""
    kind: str = "person"
    """``person`` or ``assistant`` (``KINDS``): what an assistant writes is labelled so."""

    @property
    def is_assistant(self) -> bool:
        return self.kind == "assistant"

    @property
    def writable_queues(self) -> frozenset[str] | None:
        """The queues a write may touch: its write queues within its read queues (None:
        every queue); a caller never writes where it cannot read."""
        if self.write_queues is None:
            return self.queues
        return self.write_queues if self.queues is None else self.write_queues & self.queues

    def may_call(self, tags: Iterable[str]) -> bool:
        """Whether this caller holds every scope among a tool's ``tags`` (tags of the form
        ``resource:action``); a tool with no scope tag is nobody's (fail closed)."""
        needed = {tag for tag in tags if SCOPE.match(tag)}
        return bool(needed) and needed <= self.scopes

    CLAIMS_KEY = "ticket_server_caller"
    """The claim of an HTTP access token that carries what the token alone does not."""

    def claims(self) -> dict[str, object]:
        """What an HTTP access token carries about the caller (never the token);
        ``from_claims`` reads it back."""
        return {
            self.CLAIMS_KEY: {
                "queues": sorted(self.queues) if self.queues is not None else None,
                "tool_rate_limit": self.tool_rate_limit,
                "http_rate_limit": self.http_rate_limit,
                "registered": self.registered,
                "write_queues": sorted(self.write_queues)
                if self.write_queues is not None
                else None,
                "confirm_writes": sorted(self.confirm_writes)
                if self.confirm_writes is not None
                else None,
                "toolsets": sorted(self.toolsets) if self.toolsets is not None else None,
                "kind": self.kind,
            }
        }

    @classmethod
    def from_claims(cls, name: str, scopes: Iterable[str], claims: Mapping[str, Any]) -> Caller:
        """The caller an access token describes (client id, scopes, ``claims()``)."""
        ours = claims.get(cls.CLAIMS_KEY) or {}
        queues = ours.get("queues")
        return cls(
            name=name,
            scopes=frozenset(scopes),
            queues=frozenset(queues) if queues is not None else None,
            tool_rate_limit=ours.get("tool_rate_limit"),
            http_rate_limit=ours.get("http_rate_limit"),
            registered=ours.get("registered", True) is not False,
            write_queues=frozenset(ours["write_queues"])
            if ours.get("write_queues") is not None
            else None,
            confirm_writes=frozenset(ours["confirm_writes"])
            if ours.get("confirm_writes") is not None
            else None,
            toolsets=frozenset(ours["toolsets"]) if ours.get("toolsets") is not None else None,
            kind="assistant" if ours.get("kind") == "assistant" else "person",
        )


BUILTIN_LOCAL = Caller(name=LOCAL, scopes=frozenset({"tickets:read"}))
"""The stdio caller when neither a token nor a caller name is configured."""


def _split(text: str | None) -> frozenset[str] | None:
    return None if text is None else frozenset(text.split())


def _caller(row: CallerRow) -> Caller:
    return Caller(
        name=row.name,
        scopes=frozenset(row.scopes.split()),
        queues=_split(row.queues),
        tool_rate_limit=row.tool_rate_limit,
        http_rate_limit=row.http_rate_limit,
        write_queues=_split(row.write_queues),
        confirm_writes=_split(row.confirm_writes),
        toolsets=_split(row.toolsets),
        kind=row.kind,
    )


@dataclass(frozen=True)
class CallerInfo:
    """A row as `callers list` shows it (never the token or its hash)."""

    name: str
    scopes: list[str]
    queues: list[str] | None
    tool_rate_limit: str | None
    http_rate_limit: str | None
    created_at: datetime
    revoked_at: datetime | None
    write_queues: list[str] | None = None
    toolsets: list[str] | None = None
    confirm_writes: list[str] | None = None
    kind: str = "person"


KINDS = ("person", "assistant")
"""What a caller is: a person's client, or an assistant acting on its own."""


def validate(
    name: str,
    scopes: list[str],
    queues: list[str] | None,
    limits: list[str | None],
    confirm_writes: list[str] | None = None,
    toolsets: list[str] | None = None,
    kind: str = "person",
) -> None:
    if not NAME.match(name):
        raise CallerError(
            f"caller name {name!r}: use 1 to 64 lower-case letters, digits, '.', '_' or '-'"
        )
    if kind not in KINDS:
        raise CallerError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    if not scopes:
        raise CallerError("give at least one --scope, e.g. --scope tickets:read")
    for scope in scopes:
        if not SCOPE.match(scope):
            raise CallerError(f"scope {scope!r}: scopes look like tickets:read")
    from typing import get_args

    from ticket_server.settings import WriteAction

    for action in confirm_writes or []:
        if action not in get_args(WriteAction):
            raise CallerError(
                f"confirmation {action!r}: one of {', '.join(get_args(WriteAction))}, or none"
            )
    from ticket_server.settings import ToolsetName

    for toolset in toolsets or []:
        if toolset not in get_args(ToolsetName):
            raise CallerError(
                f"toolset {toolset!r}: one of {', '.join(get_args(ToolsetName))} "
                "(`ticket-server tools toolsets` lists them)"
            )
    for queue in queues or []:
        if not QUEUE.match(queue):
            raise CallerError(f"queue {queue!r}: use letters, digits, '.', '_' or '-'")
    from ticket_server.settings import rate_limit_problem

    for limit in limits:
        if limit is not None and (problem := rate_limit_problem(limit)) is not None:
            raise CallerError(problem)


_generation = 0
"""Bumped by every write to the callers table made in this process (add, revoke,
rotate): an identity cached before it is not used after it, in any store."""

_MISS = object()


def _invalidate() -> None:
    global _generation
    _generation += 1


class CallerCache:
    """Identity lookups (token hash -> caller, caller name -> caller), kept for
    ``seconds`` (``TICKET_SERVER_CALLER_CACHE_SECONDS``; 0 keeps nothing). A revocation
    or rotation made by another process (the CLI, another replica) takes effect within
    ``seconds``; one made in this process at once. Failures are never kept."""

    MAX_ENTRIES = 10_000  # unknown tokens are kept too: bound what a flood of them costs

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._entries: dict[Hashable, tuple[float, int, Any]] = {}

    def get(self, key: Hashable) -> Any:
        """The kept value, or ``_MISS``."""
        entry = self._entries.get(key)
        if entry is None:
            return _MISS
        expires, generation, value = entry
        if generation != _generation or monotonic() >= expires:
            self._entries.pop(key, None)
            return _MISS
        return value

    def put(self, key: Hashable, value: Any, generation: int) -> None:
        """Keep ``value``, read when the process-wide generation was ``generation``."""
        if self.seconds <= 0 or generation != _generation:
            return
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (monotonic() + self.seconds, generation, value)


class CallerStore:
    """Queries on the callers table, over its own engine, made by ``make_engine`` on the
    first query. Identity lookups (``by_token``, ``by_name``, ``find``) are cached for
    ``cache_seconds``."""

    def __init__(
        self,
        make_engine: Callable[[], AsyncEngine],
        timeout: float = 5.0,
        cache_seconds: float = 0.0,
    ) -> None:
        self._make_engine = make_engine
        self._engine: AsyncEngine | None = None
        self._sessions: async_sessionmaker[AsyncSession] | None = None
        self._timeout = timeout
        self._cache = CallerCache(cache_seconds)
        # One read per key at a time: the calls that arrive together (a client's first
        # burst, many replicas' callers after a restart) wait for the same answer
        # instead of each taking a connection, which under load would time some out.
        self._reading: dict[Hashable, asyncio.Task[Any]] = {}

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            self._engine = self._make_engine()
        return self._engine

    @property
    def cache(self) -> CallerCache:
        return self._cache

    async def aclose(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()

    @asynccontextmanager
    async def session(self, what: str = "callers registry") -> AsyncIterator[AsyncSession]:
        """A session on the access tables; a database failure is logged as ``what``
        unavailable and raised as ``RegistryUnavailable``."""
        from ticket_server.tickets.domain import bounded

        if self._sessions is None:
            from sqlalchemy.ext.asyncio import async_sessionmaker

            self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        async with bounded(self._timeout, RegistryUnavailable, what), self._sessions() as session:
            yield session

    async def _lookup(
        self, key: Hashable, where: Callable[[Any], Any], read: Callable[[CallerRow | None], R]
    ) -> R:
        """``read(row)`` of the row ``where(CallerRow)`` selects, kept in the cache under
        ``key``; lookups of one key while it is read share that read (which a caller
        giving up does not cancel)."""
        cached = self._cache.get(key)
        if cached is not _MISS:
            return cast(R, cached)  # stored under this key by ``_read`` of this ``read``
        task = self._reading.get(key)
        if task is None:
            task = self._reading[key] = asyncio.ensure_future(self._read(key, where, read))
            task.add_done_callback(lambda done: self._read_done(key, done))
        return cast(R, await asyncio.shield(task))

    def _read_done(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        del self._reading[key]
        if not task.cancelled():
            task.exception()  # retrieved here too: every waiter may have given up

    async def _read(
        self, key: Hashable, where: Callable[[Any], Any], read: Callable[[CallerRow | None], R]
    ) -> R:
        from sqlalchemy import select

        from ticket_server.access.models import CallerRow

        generation = _generation
        async with self.session() as session:
            value = read(await session.scalar(select(CallerRow).where(where(CallerRow))))
        self._cache.put(key, value, generation)
        return value

    async def by_token(self, token: str) -> Caller | None:
        """The live (not revoked) caller holding ``token``; None for any other token."""
        digest = token_hash(token)

        def live(row: CallerRow | None) -> Caller | None:
            if (
                row is None
                or row.revoked_at is not None
                or not hmac.compare_digest(row.token_sha256, digest)
            ):
                return None
            return _caller(row)

        return await self._lookup(("token", digest), lambda t: t.token_sha256 == digest, live)

    def knows_token(self, token: str) -> bool:
        """Whether ``by_token(token)`` would be answered from the cache (no query)."""
        return self._cache.get(("token", token_hash(token))) is not _MISS

    async def by_name(self, name: str) -> Caller | None:
        """The live caller called ``name``; None if there is none or it is revoked."""
        return (await self.find(name))[0]

    async def find(self, name: str) -> tuple[Caller | None, bool]:
        """(the live caller called ``name`` or None, whether a row of that name exists);
        ``name`` is normalised first (``normalise_name``)."""
        name = normalise_name(name)

        def found(row: CallerRow | None) -> tuple[Caller | None, bool]:
            if row is None:
                return None, False
            return (None if row.revoked_at is not None else _caller(row)), True

        return await self._lookup(("name", name), lambda t: t.name == name, found)

    async def exists(self, name: str) -> bool:
        name = normalise_name(name)
        from sqlalchemy import select

        from ticket_server.access.models import CallerRow

        async with self.session() as session:
            return (
                await session.scalar(select(CallerRow.pk).where(CallerRow.name == name))
            ) is not None

    async def count(self) -> int:
        from sqlalchemy import func, select

        from ticket_server.access.models import CallerRow

        async with self.session() as session:
            return int(await session.scalar(select(func.count()).select_from(CallerRow)) or 0)

    async def add(
        self,
        name: str,
        scopes: list[str],
        queues: list[str] | None = None,
        tool_rate_limit: str | None = None,
        http_rate_limit: str | None = None,
        *,
        write_queues: list[str] | None = None,
        confirm_writes: list[str] | None = None,
        toolsets: list[str] | None = None,
        only_if_empty: bool = False,
        kind: str = "person",
    ) -> str | None:
        """Create a caller; returns its token (the only time it exists in plain text).
        ``confirm_writes`` (an empty list: none) replaces the deployment's confirmation
        list for this caller.

        With ``only_if_empty``, returns None and creates nothing when any caller exists.
        """
        name = normalise_name(name)
        from sqlalchemy import select

        from ticket_server.access.models import CallerRow

        validate(
            name,
            scopes,
            [*(queues or []), *(write_queues or [])],
            [tool_rate_limit, http_rate_limit],
            confirm_writes,
            toolsets,
            kind,
        )
        token = new_token()
        row = CallerRow(
            name=name,
            token_sha256=token_hash(token),
            scopes=" ".join(sorted(set(scopes))),
            queues=" ".join(sorted(set(queues))) if queues else None,
            write_queues=" ".join(sorted(set(write_queues))) if write_queues else None,
            confirm_writes=" ".join(sorted(set(confirm_writes)))
            if confirm_writes is not None
            else None,
            toolsets=" ".join(sorted(set(toolsets))) if toolsets else None,
            tool_rate_limit=tool_rate_limit,
            http_rate_limit=http_rate_limit,
            kind=kind,
            created_at=datetime.now(UTC),
        )
        async with self.session() as session, session.begin():
            if only_if_empty and await session.scalar(select(CallerRow.pk).limit(1)) is not None:
                return None
            existing = await session.scalar(select(CallerRow).where(CallerRow.name == name))
            if existing is not None:
                state = "revoked " if existing.revoked_at is not None else ""
                raise CallerError(
                    f"callers add: a {state}caller named {name!r} exists; `callers rotate {name}` "
                    f"gives it a new token{' and restores it' if state else ''}, or choose another name"
                )
            session.add(row)
        _invalidate()
        return token

    async def list(self) -> list[CallerInfo]:
        from sqlalchemy import select

        from ticket_server.access.models import CallerRow

        async with self.session() as session:
            rows = (await session.scalars(select(CallerRow).order_by(CallerRow.name))).all()
        return [
            CallerInfo(
                name=r.name,
                scopes=r.scopes.split(),
                queues=r.queues.split() if r.queues is not None else None,
                tool_rate_limit=r.tool_rate_limit,
                http_rate_limit=r.http_rate_limit,
                created_at=r.created_at,
                revoked_at=r.revoked_at,
                write_queues=r.write_queues.split() if r.write_queues is not None else None,
                toolsets=r.toolsets.split() if r.toolsets is not None else None,
                confirm_writes=r.confirm_writes.split() if r.confirm_writes is not None else None,
                kind=r.kind,
            )
            for r in rows
        ]

    async def revoke(self, name: str) -> None:
        name = normalise_name(name)
        from sqlalchemy import select, update

        from ticket_server.access.models import CallerRow

        async with self.session() as session, session.begin():
            done = await session.execute(
                update(CallerRow)
                .where(CallerRow.name == name, CallerRow.revoked_at.is_(None))
                .values(revoked_at=datetime.now(UTC))
            )
            if (
                done.rowcount == 0  # type: ignore[attr-defined]
                and await session.scalar(select(CallerRow.pk).where(CallerRow.name == name)) is None
            ):
                raise CallerError(
                    f"no caller named {name!r}; `ticket-server callers list` shows them"
                )
        _invalidate()

    async def rotate(self, name: str) -> tuple[str, bool]:
        """A new token for ``name`` (the old one stops working), and whether the caller was
        revoked: a revoked caller is restored, with its scopes, queues and limits."""
        name = normalise_name(name)
        from sqlalchemy import select

        from ticket_server.access.models import CallerRow

        token = new_token()
        async with self.session() as session, session.begin():
            row = await session.scalar(select(CallerRow).where(CallerRow.name == name))
            if row is None:
                raise CallerError(
                    f"no caller named {name!r}; `ticket-server callers list` shows them"
                )
            restored = row.revoked_at is not None
            row.token_sha256 = token_hash(token)
            row.revoked_at = None
        _invalidate()
        return token, restored


def open_store(settings: Settings) -> CallerStore:
    """The callers store on ``settings.database_url``; its engine is made on the first query."""
    from ticket_server.db import create_engine

    # The store reads one caller row at a time and appends audit rows it never reads
    # again: SQLite's default page cache (2 MB a connection) would only fill, over hours,
    # with pages of the audit table. A batch of audit rows goes to SQLite in multi-row INSERTs.
    return CallerStore(
        lambda: create_engine(settings, page_cache_kib=STORE_PAGE_CACHE_KIB, multirow_inserts=True),
        timeout=settings.database_timeout,
        cache_seconds=settings.caller_cache_seconds,
    )
