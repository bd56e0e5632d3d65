"""`ticket-server callers ...` and `ticket-server audit`: the logic behind the CLI.

Output: data (a new token, the callers list, audit rows) goes to stdout so that it can
be piped (``TOKEN=$(ticket-server callers add ...)``); every message goes to stderr.
The one exception is `callers bootstrap` (run by `make run` right before serving): it
tells the user on stderr how to connect, token included, and stdout stays empty.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from ticket_server.access.callers import CallerError, CallerStore, RegistryUnavailable, open_store
from ticket_server.admin import CommandError
from ticket_server.admin.reports import parse_since, prune, query
from ticket_server.db import DatabaseSetupError, require_current_schema, sqlite_write_problem
from ticket_server.settings import Settings

T = TypeVar("T")
BOOTSTRAP_NAME = "admin"


def _run(
    settings: Settings, work: Callable[[CallerStore], Awaitable[T]], *, writes: bool = False
) -> T:
    """``work`` on the callers store of the migrated database; a command that ``writes``
    is refused first, in one line, when the SQLite file or its folder is read-only."""
    problem = sqlite_write_problem(settings.database_url) if writes else None
    if problem is not None:
        raise CommandError(problem)

    async def main() -> T:
        await require_current_schema(settings)  # says what to run, or that the database is down
        store = open_store(settings)
        try:
            return await work(store)
        finally:
            await store.aclose()

    try:
        return asyncio.run(main())
    except (CallerError, DatabaseSetupError) as exc:
        raise CommandError(str(exc)) from exc
    except RegistryUnavailable as exc:
        raise CommandError(
            "cannot read the callers table; run `ticket-server db upgrade` first"
        ) from exc


def _connect_hint(settings: Settings, token: str) -> str:
    url = f"{settings.base_url}/mcp"
    return (
        f"Connect over Streamable HTTP to {url} with the header\n"
        f"  Authorization: Bearer {token}\n"
        "This token is shown only now (only its SHA-256 is stored); keep it in your MCP "
        "client's configuration, or make a new one with `ticket-server callers rotate NAME`."
    )


def callers_add(
    settings: Settings,
    name: str,
    scopes: list[str],
    queues: list[str] | None,
    tool_limit: str | None,
    http_limit: str | None,
    write_queues: list[str] | None = None,
    confirm_writes: list[str] | None = None,
    toolsets: list[str] | None = None,
    kind: str = "person",
) -> None:
    from ticket_server.access.identity import KNOWN_SCOPES

    unknown = sorted(set(scopes) - set(KNOWN_SCOPES))
    if unknown:
        raise CommandError(
            f"callers add: unknown scope(s) {', '.join(unknown)}: no tool needs them; "
            f"the known scopes are {', '.join(KNOWN_SCOPES)}"
        )
    if confirm_writes is not None:  # write names in any case, as caller and queue names
        confirm_writes = [a.strip().lower() for a in confirm_writes]
    if toolsets is not None:  # toolset names in any case, as the actions
        toolsets = [t.strip().lower() for t in toolsets]
    problem = contradiction(scopes, queues, write_queues, confirm_writes)
    if problem is not None:
        raise CommandError(f"callers add: {problem}")
    if confirm_writes is not None:
        confirm_writes = [a for a in confirm_writes if a != "none"]

    async def add(store: CallerStore) -> str | None:
        known = await existing_queues(store)
        return await store.add(
            name,
            scopes,
            known_queues(queues, known, "--queue"),
            tool_limit,
            http_limit,
            write_queues=known_queues(write_queues, known, "--write-queue"),
            confirm_writes=confirm_writes,
            toolsets=toolsets,
            kind=kind,
        )

    token = _run(settings, add, writes=True)
    assert token is not None
    print(token)
    print(f"created caller {name!r}; the token above is shown only once", file=sys.stderr)


def contradiction(
    scopes: list[str],
    queues: list[str] | None,
    write_queues: list[str] | None,
    confirm_writes: list[str] | None,
) -> str | None:
    """The first grant of `callers add` that cannot work as given, in one line, or None."""
    writes = "tickets:write" in scopes
    if writes and "tickets:read" not in scopes:
        return (
            "tickets:write needs tickets:read too (a writer reads what it changes, and without "
            "it every queue would be writable); add --scope tickets:read"
        )
    if write_queues and not writes:
        return "--write-queue needs --scope tickets:write (it narrows where that scope applies)"
    if confirm_writes and not writes:
        return "--confirm needs --scope tickets:write (it says which writes a person confirms)"
    if confirm_writes and "none" in confirm_writes and len(set(confirm_writes)) > 1:
        return "--confirm none means no confirmation at all; give it alone, or only the actions"
    if write_queues and queues:
        fold = {q.strip().lower() for q in queues}
        outside = sorted({q for q in write_queues if q.strip().lower() not in fold})
        if outside:
            return (
                f"--write-queue {', '.join(outside)} is not among its --queue queues "
                f"({', '.join(queues)}): a caller never writes where it cannot read"
            )
    return None


async def existing_queues(store: CallerStore) -> list[str]:
    """The queues of the queues table (revision 0012; none in a database without tickets
    or ``queues add``)."""
    from sqlalchemy import text

    async with store.session() as session:
        return [r[0] for r in await session.execute(text("SELECT name FROM queues"))]


def known_queues(given: list[str] | None, known: list[str], option: str) -> list[str] | None:
    """``given`` as stored: each the existing queue it names, ignoring case, accents and
    surrounding spaces (lower case while no ticket exists); one naming no queue is a
    ``CallerError`` listing them."""
    if given is None:
        return None
    from ticket_server.tickets.analyzer import fold

    kept = []
    for queue in given:
        wanted = fold(queue.strip())
        found = [q for q in known if fold(q) == wanted]
        if found:
            kept.append(found[0])
        elif not known:
            kept.append(queue.strip().lower())
        else:
            raise CallerError(
                f"{option} {queue!r}: no such queue; the queues are {', '.join(sorted(known))}"
            )
    return kept


def callers_bootstrap(settings: Settings, name: str = BOOTSTRAP_NAME) -> None:
    """Create the first caller (tickets:read, every queue) unless any caller exists."""
    token = _run(
        settings, lambda s: s.add(name, ["tickets:read"], None, only_if_empty=True), writes=True
    )
    if token is None:
        print("callers exist already; `ticket-server callers list` shows them", file=sys.stderr)
        return
    print(f"Created the first caller, {name!r} (tickets:read on every queue).", file=sys.stderr)
    print(_connect_hint(settings, token), file=sys.stderr)


def callers_list(settings: Settings, as_json: bool = False) -> None:
    rows = _run(settings, lambda s: s.list())
    if as_json:
        for r in rows:
            print(
                json.dumps(
                    {
                        "name": r.name,
                        "scopes": r.scopes,
                        "queues": r.queues,
                        "write_queues": r.write_queues,
                        "toolsets": r.toolsets,
                        "kind": r.kind,
                        "confirm_writes": r.confirm_writes,
                        "tool_rate_limit": r.tool_rate_limit,
                        "http_rate_limit": r.http_rate_limit,
                        "created_at": r.created_at.isoformat(),
                        "revoked_at": r.revoked_at.isoformat() if r.revoked_at else None,
                    }
                )
            )
        return
    table = [
        [
            "NAME",
            "SCOPES",
            "QUEUES",
            "TOOLSETS",
            "WRITE QUEUES",
            "CONFIRM",
            "TOOL LIMIT",
            "HTTP LIMIT",
            "CREATED",
            "REVOKED",
        ]
    ]
    for r in rows:
        writes = "tickets:write" in r.scopes
        table.append(
            [
                r.name,
                ",".join(r.scopes),
                ",".join(r.queues) if r.queues is not None else "(all)",
                ",".join(r.toolsets) if r.toolsets is not None else "(default)",
                "-"
                if not writes
                else ",".join(r.write_queues)
                if r.write_queues is not None
                else "(its queues)",
                "-"
                if not writes
                else (",".join(r.confirm_writes) or "none")
                if r.confirm_writes is not None
                else "(default)",
                r.tool_rate_limit or "(default)",
                r.http_rate_limit or "(default)",
                r.created_at.strftime("%Y-%m-%d %H:%M"),
                r.revoked_at.strftime("%Y-%m-%d %H:%M") if r.revoked_at else "-",
            ]
        )
    _print_table(table)


def callers_revoke(settings: Settings, name: str) -> None:
    _run(settings, lambda s: s.revoke(name), writes=True)
    print(f"revoked caller {name!r}: its token no longer works", file=sys.stderr)


def callers_rotate(settings: Settings, name: str) -> None:
    """A new token for ``name``; a revoked caller is restored with it (and says so)."""
    token, restored = _run(settings, lambda s: s.rotate(name), writes=True)
    print(token)
    if restored:
        print(
            f"caller {name!r} was revoked and is restored with a new token (shown only once)",
            file=sys.stderr,
        )
    else:
        print(
            f"new token for {name!r} (shown only once); the old one no longer works",
            file=sys.stderr,
        )


AUDIT_LIMIT = 1000
"""The most recent rows `audit` prints without --limit."""


def audit(
    settings: Settings,
    caller: str | None,
    tool: str | None,
    since: str | None,
    limit: int | None,
    as_json: bool = False,
    ticket: str | None = None,
) -> None:
    if ticket is not None:
        given = [
            flag
            for flag, value in (
                ("--caller", caller),
                ("--tool", tool),
                ("--since", since),
                ("--limit", limit),
            )
            if value is not None
        ]
        if given:
            raise CommandError(
                f"audit --ticket tells a ticket's whole story and takes no {', '.join(given)}; "
                f"drop {'them' if len(given) > 1 else 'it'}, or leave out --ticket to filter "
                "the audit trail"
            )
        ticket_story(settings, ticket.strip().upper(), as_json)
        return
    limit = AUDIT_LIMIT if limit is None else limit
    if limit < 1:
        raise CommandError(f"audit --limit {limit}: give how many rows to print, 1 or more")
    for flag, value in (("--caller", caller), ("--tool", tool)):
        if value is not None and not value.strip():  # "$NAME" unset: not every row
            raise CommandError(f"audit {flag}: give a name; leave {flag} out for every one")
    if caller is not None:
        caller = caller.strip().lower()  # as the callers table stores names
    try:
        moment = parse_since(since) if since else None
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    rows = _run(settings, lambda s: query(s, caller=caller, tool=tool, since=moment, limit=limit))
    if as_json:
        for r in rows:
            print(json.dumps(_row(r), ensure_ascii=False))
        return
    table = [
        [
            "TIME",
            "CALLER",
            "TRANSPORT",
            "PROTOCOL",
            "TOOL",
            "OUTCOME",
            "BYTES",
            "MS",
            "TRACE",
            "ARGUMENTS",
        ]
    ]
    for r in rows:
        table.append(
            [
                r.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                r.caller or "-",
                r.transport,
                r.protocol_version or "-",
                r.tool,
                r.outcome,
                str(r.result_bytes),
                f"{r.duration_ms:.1f}",
                r.trace_id[:12],
                r.arguments,
            ]
        )
    _print_table(table)
    print(f"{len(rows)} audit row(s)", file=sys.stderr)


PRUNE_KEEPS_AT_LEAST = timedelta(hours=1)
"""``audit prune`` keeps at least this much of the newest audit trail unless told --yes."""


def audit_prune(settings: Settings, older_than: str | None, yes: bool = False) -> None:
    """Delete audit rows older than ``older_than`` (``90d``, ``12h``, an ISO time), by
    default older than ``audit_retention_days``. A cut-off that keeps less than
    ``PRUNE_KEEPS_AT_LEAST`` (``0d``, a time in the future) is refused without ``yes``."""
    try:
        before = parse_since(older_than or f"{settings.audit_retention_days}d")
    except ValueError as exc:
        raise CommandError(str(exc).replace("--since", "--older-than")) from exc
    if not yes and before > datetime.now(UTC) - PRUNE_KEEPS_AT_LEAST:
        raise CommandError(
            f"audit prune --older-than {older_than} would delete the audit rows of the last "
            "hour too (all of them, for 0d); give a longer age (e.g. --older-than 90d), or "
            "add --yes to delete them"
        )
    deleted = _run(settings, lambda s: prune(s, before), writes=True)
    print(
        f"{deleted} audit row(s) before {before.isoformat(timespec='seconds')} deleted",
        file=sys.stderr,
    )


def ticket_story(settings: Settings, ticket_id: str, as_json: bool = False) -> None:
    """Print the story of one ticket: creation, comments, changes, and the tool calls
    naming it (who, through which transport, how each ended, with the trace id)."""
    from ticket_server.admin.reports import ticket_story as story_of

    rows = _run(settings, lambda s: story_of(s, ticket_id))
    if not rows:
        raise CommandError(f"no ticket {ticket_id!r} and no audited call naming it")
    if as_json:
        for at, who, what, trace in rows:
            print(
                json.dumps(
                    {"time": at.isoformat(), "who": who, "what": what, "trace_id": trace or None},
                    ensure_ascii=False,
                )
            )
        return
    table = [["TIME", "WHO", "WHAT", "TRACE"]]
    table += [
        [at.strftime("%Y-%m-%dT%H:%M:%SZ"), who, what, trace[:12]] for at, who, what, trace in rows
    ]
    _print_table(table)
    print(f"{len(rows)} entries for {ticket_id}", file=sys.stderr)


def report_deprecated(settings: Settings, since: str | None, as_json: bool = False) -> None:
    """Who still calls each deprecated tool, how often and when last (from the audit trail)."""
    from ticket_server.admin.reports import deprecated_usage
    from ticket_server.tools.versions import ToolVersions

    retiring = ToolVersions.with_dates(settings.retirement_dates).deprecations
    try:
        moment = parse_since(since) if since else None
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    rows = _run(settings, lambda s: deprecated_usage(s, sorted(retiring), moment))
    if as_json:
        for caller, tool, calls, last in rows:
            d = retiring[tool]
            print(
                json.dumps(
                    {
                        "caller": caller,
                        "tool": tool,
                        "calls": calls,
                        "last_call": last.isoformat(),
                        "replacement": d.replacement,
                        "sunset": d.sunset.isoformat(),
                    }
                )
            )
        return
    table = [["CALLER", "TOOL", "CALLS", "LAST CALL", "REPLACEMENT", "RETIRES"]]
    for caller, tool, calls, last in rows:
        d = retiring[tool]
        table.append(
            [
                caller or "-",
                tool,
                str(calls),
                last.strftime("%Y-%m-%dT%H:%M:%SZ"),
                d.replacement,
                d.sunset.isoformat(),
            ]
        )
    _print_table(table)
    print(f"{len(rows)} caller/tool pair(s) still use deprecated tools", file=sys.stderr)


def _row(r: Any) -> dict[str, Any]:
    return {
        "time": r.time.isoformat(),
        "trace_id": r.trace_id,
        "caller": r.caller,
        "transport": r.transport,
        "protocol_version": r.protocol_version,
        "tool": r.tool,
        "arguments": json.loads(r.arguments),
        "outcome": r.outcome,
        "detail": r.detail,
        "result_bytes": r.result_bytes,
        "duration_ms": r.duration_ms,
        # a write's change (ticket, version, idempotency key, confirmation), else null
        "change": json.loads(r.change) if r.change else None,
    }


def printable(text: str) -> str:
    """``text`` safe to print on an operator's terminal: control and format characters
    (escape sequences, NUL, bidirectional marks, zero-width characters, line
    separators) shown escaped (``\\x1b``, ``\\u202e``); other text as stored."""
    import unicodedata

    return "".join(
        (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        else c
        for c in text
    )


def _print_table(rows: list[list[str]]) -> None:
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
