"""bulk_update_tickets: one change (status, owner, priority, tags, a reply, an internal
note) to many tickets, chosen by ids or by a search, in two calls.

1. ``dry_run: true`` (the default): every write's own checks, without a lock or a write
   (``TicketWrites``' check mode), for each ticket and part of the change. The answer
   lists what would change on each ticket, the tickets that would refuse it (and why),
   and a ``plan_token``: the tickets with the version each was read at, the caller and
   the change, under HMAC-SHA256 with the server's key, valid ``PLAN_SECONDS``.
2. ``dry_run: false`` with that token and the same change: each ticket of the plan is
   written through the write path exactly as the single write tools write it
   (``Writer.run``: its lock, checks, version, history, idempotency key and audit row, in
   one transaction per ticket and part), with ``expected_version`` the plan's version, so
   a ticket changed since the dry run is skipped and listed, never written blind. A
   failure of one ticket is listed and the others go on.

The parts of a change run in this order on each ticket: the internal note, the reply,
the owner, the priority (with an internal note saying so, as escalate_ticket keeps its
reason), the tags (as update_ticket_tags changes them), the status last (so a reply goes
out before a ticket is closed, and a closed ticket's tags stay as they were). Confirmation:
when policy confirms a reply, closing, a tag change or ``bulk_update_tickets``, the person is asked
once for the whole plan, on the confirmed run. With an ``idempotency_key``, each write
uses the key ``<key>:<ticket>:<part>``: a retried confirmed run writes nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastmcp import Context
from fastmcp.dependencies import Depends
from fastmcp.exceptions import ToolError
from fastmcp.tools import ToolResult
from mcp.types import InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from ticket_server.access.context import current_call
from ticket_server.access.policy import ToolPolicy
from ticket_server.tickets.domain import (
    DatabaseUnavailable,
    NoChange,
    StaleVersion,
    TicketPriority,
    TicketStatus,
    Visibility,
    WriteRefused,
)
from ticket_server.tools.classification import TagName, tag_change
from ticket_server.tools.declare import write_tool
from ticket_server.tools.errors import UnavailableError, model_error
from ticket_server.tools.lookup import MAX_ID_LENGTH, normalise_ticket_id
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.writes import (
    CLOSE_ACTION,
    MAX_TEXT,
    Change,
    Key,
    Writer,
    request_hash,
)

if TYPE_CHECKING:
    from ticket_server.tickets.repository import TicketRepository
    from ticket_server.tickets.writes import WriteContext

NAME = "bulk_update_tickets"

POLICY = {NAME: ToolPolicy(digests=("reply", "note", "plan_token"))}
"""What the call pipeline applies to it: the reply and the note are kept as digests, the comment rows hold the text (``access/policy.py``); so is the plan_token (up to ``MAX_TOKEN`` characters, which would fill the arguments the audit keeps)."""
PLAN_SECONDS = 900
"""How long a dry run's plan_token may be confirmed."""
MAX_TOKEN = 65_536
MAX_IDS = 2_000
"""Most ids the schema takes (the settings' bound); a call may name ``bulk_max_tickets``."""
BULK = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
)
Part = Literal["note", "reply", "owner", "priority", "tags", "status"]
PARTS: tuple[Part, ...] = ("note", "reply", "owner", "priority", "tags", "status")
BulkTags = Annotated[list[TagName], Field(max_length=20)]


class TagsChanged(BaseModel):
    before: list[str]
    after: list[str]


class Planned(BaseModel):
    id: str
    version: int
    changes: list[Change]
    adds: list[Literal["note", "reply"]]
    tags: TagsChanged | None = None


class Failed(BaseModel):
    id: str
    reason: str


class BulkResult(BaseModel):
    # dry_run: tickets = what would change (plan_token confirms it); confirmed: tickets =
    # what changed; skipped = changed since the dry run; failed = refused, with why.
    dry_run: bool
    tickets: list[Planned]
    skipped: list[Failed]
    failed: list[Failed]
    plan_token: str | None = None


def _change_hash(change: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(change, sort_keys=True, default=str).encode()).hexdigest()


def _selection_hash(ticket_ids: list[str] | None, query: str | None) -> str:
    """The tickets a dry run was asked for, as sent: a confirmed run naming others is
    refused (the plan_token, not these, decides what is written)."""
    return _change_hash({"ticket_ids": ticket_ids, "query": query})


def operations(
    writer: Writer, change: dict[str, Any], free_tags: bool
) -> list[tuple[Part, str, Any, tuple[Any, ...]]]:
    """(part, the single write tool it is, its operation, its arguments) in order;
    ``free_tags``: a tag outside the vocabulary joins it."""
    w = writer.writes
    out: list[tuple[Part, str, Any, tuple[Any, ...]]] = []
    if change["note"] is not None:
        out.append(
            ("note", "add_internal_note", w.add_comment, (change["note"], Visibility.INTERNAL))
        )
    if change["reply"] is not None:
        out.append(
            ("reply", "reply_to_customer", w.add_comment, (change["reply"], Visibility.PUBLIC))
        )
    if change["owner"] is not None:
        owner = change["owner"] or None
        out.append(("owner", "assign_ticket", w.assign, (owner,)))
    if change["priority"] is not None:
        reason = "Priority set by a bulk change."
        out.append(
            (
                "priority",
                "escalate_ticket",
                w.escalate,
                (TicketPriority(change["priority"]), None, reason),
            )
        )
    if change["add_tags"] is not None or change["remove_tags"] is not None:
        tags = tag_change(change["add_tags"] or [], change["remove_tags"] or [], free_tags)
        out.append(("tags", "update_ticket_tags", w.classify, (tags,)))
    if change["status"] is not None:
        out.append(("status", "set_ticket_status", w.set_status, (TicketStatus(change["status"]),)))
    return out


def contexts(
    base: WriteContext,
    tool: str,
    ticket_id: str,
    part: str,
    args: tuple[Any, ...],
    version: int | None,
    change: dict[str, Any],
) -> WriteContext:
    if part == "tags":  # the arguments update_ticket_tags is called with
        shown: Any = {"add": change["add_tags"] or [], "remove": change["remove_tags"] or []}
    else:
        shown = [a.value if hasattr(a, "value") else a for a in args]
    return replace(
        base,
        tool=tool,
        request_sha256=request_hash(tool, {"ticket_id": ticket_id, "bulk": shown}),
        idempotency_key=_derived_key(base.idempotency_key, ticket_id, part),
        expected_version=version,
    )


async def select(
    repo: TicketRepository,
    ticket_ids: list[str] | None,
    query: str | None,
    queues: frozenset[str] | None,
    max_tickets: int,
) -> list[str]:
    """The tickets a change is for: ``ticket_ids`` (normalised, once each), or the best
    ``max_tickets`` matches of ``query`` in ``queues``."""
    if ticket_ids:
        return list(dict.fromkeys(normalise_ticket_id(t) for t in ticket_ids))
    from ticket_server.tickets.search import SearchFilters

    assert query is not None
    try:
        found = await repo.search(
            query, SearchFilters(queues=queues), "relevance", None, max_tickets
        )
    except DatabaseUnavailable as exc:
        raise UnavailableError() from exc
    return [t.id for t, _ in found.tickets]


async def bulk_update_tickets(
    ctx: Context,
    ticket_ids: Annotated[
        Annotated[
            list[Annotated[str, Field(max_length=MAX_ID_LENGTH)]],
            Field(min_length=1, max_length=MAX_IDS),
        ]
        | None,
        Field(description="Up to 500 (a setting)."),
    ] = None,
    query: Annotated[
        Annotated[str, Field(min_length=1, max_length=500)] | None,
        Field(description="Or: search words."),
    ] = None,
    status: TicketStatus | None = None,
    owner: Annotated[
        Annotated[str, Field(max_length=64)] | None,
        Field(description='Login; "" unassigns.'),
    ] = None,
    priority: TicketPriority | None = None,
    add_tags: Annotated[BulkTags | None, Field(description="Tags to add.")] = None,
    remove_tags: Annotated[BulkTags | None, Field(description="Tags to take off.")] = None,
    reply: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_TEXT)] | None,
        Field(description="Sent to each customer."),
    ] = None,
    note: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_TEXT)] | None,
        Field(description="An internal note."),
    ] = None,
    dry_run: bool = True,
    plan_token: Annotated[
        Annotated[str, Field(max_length=MAX_TOKEN)] | None,
        Field(description="From the dry run."),
    ] = None,
    idempotency_key: Key = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """One change to many tickets of your queues, by ticket_ids or query. dry_run
    (default) shows each ticket's changes, refusals and a plan_token; dry_run=false
    with it applies them as single writes, skipping tickets changed since."""
    from ticket_server.tools.writes import _owner

    writer, max_tickets = services.write, services.bulk_max_tickets

    login = None if owner is None else (_owner(owner) or "") if owner.strip() else ""
    change = {
        "status": status.value if status else None,
        "owner": login,
        "priority": priority.value if priority else None,
        "add_tags": sorted(set(add_tags)) if add_tags else None,
        "remove_tags": sorted(set(remove_tags)) if remove_tags else None,
        "reply": reply,
        "note": note,
    }
    if all(v is None for v in change.values()):
        raise model_error(
            "Give a change: status, owner, priority, add_tags, remove_tags, reply or note; "
            "nothing was changed."
        )
    for name in ("reply", "note"):
        if change[name] is not None and not str(change[name]).strip():
            raise model_error(f"{name} is blank; give the text. Nothing was changed.")
    base = writer.context(ctx, NAME, {"change": change}, idempotency_key, None)
    digest = _change_hash(change)
    parts = operations(writer, change, services.free_tags)
    if dry_run:
        if (ticket_ids is None) == (query is None):
            raise model_error("Give ticket_ids or query (one of them); nothing was changed.")
        if plan_token is not None:
            raise model_error("A plan_token confirms a dry run: send it with dry_run false.")
        ids = await select(services.repository, ticket_ids, query, base.queues, max_tickets)
        if len(ids) > max_tickets:
            raise model_error(f"At most {max_tickets} tickets per call; nothing was changed.")
        planned, failed = [], []
        for tid in ids:
            try:
                changes: list[Change] = []
                version = None
                tags = None
                already: list[NoChange] = []  # parts the ticket already is as asked
                for part, tool, operation, args in parts:
                    try:
                        checked = await operation(
                            contexts(base, tool, tid, part, args, None, change),
                            tid,
                            *args,
                            audit=None,
                        )
                    except NoChange as exc:
                        already.append(exc)
                        continue
                    if checked.replay is not None:
                        continue
                    version = checked.state["version"] if version is None else version
                    changes += [
                        Change(field=c.field, old_value=c.old_value, new_value=c.new_value)
                        for c in checked.changes
                    ]
                    tags = _tags(checked.classification) or tags
                if len(already) == len(parts):
                    raise already[0]
            except WriteRefused as exc:
                failed.append(Failed(id=tid, reason=str(exc)))
                continue
            except DatabaseUnavailable as exc:
                raise UnavailableError() from exc
            planned.append(
                Planned(
                    id=tid,
                    version=version or 0,
                    changes=changes,
                    adds=[p for p in ("note", "reply") if change[p] is not None],
                    tags=tags,
                )
            )
        claims = {
            "c": base.actor,
            "t": NAME,
            "h": digest,
            "e": int(time.time()) + PLAN_SECONDS,
            "p": [[p.id, p.version] for p in planned],
            "s": _selection_hash(ticket_ids, query),
        }
        token = writer.states.seal(claims) if planned else None
        return _result(
            BulkResult(dry_run=True, tickets=planned, skipped=[], failed=failed, plan_token=token)
        )

    if plan_token is None:
        raise model_error("dry_run false needs the plan_token of a dry run of this change.")
    sealed = writer.states.unseal(plan_token)
    if (
        sealed is None
        or sealed.get("c") != base.actor
        or sealed.get("t") != NAME
        or sealed.get("h") != digest
    ):
        raise model_error(
            "The plan_token does not match this change (altered, or made for another change "
            "or caller); nothing was changed. Run the dry run again."
        )
    if (ticket_ids is not None or query is not None) and sealed.get("s") != _selection_hash(
        ticket_ids, query
    ):
        raise model_error(
            "ticket_ids or query are not the dry run's; the plan_token applies the dry run's "
            "tickets. Send them as in the dry run or leave them out; nothing was changed."
        )
    expires = sealed.get("e")
    if not isinstance(expires, int) or expires <= time.time():
        raise model_error("The plan_token expired; nothing was changed. Run the dry run again.")
    plan = [(str(t), int(v)) for t, v in sealed.get("p", [])]
    confirmation = "not required"
    single = {"reply": "reply_to_customer", "tags": "update_ticket_tags"}
    actions = {NAME} | {single[p[0]] for p in parts if p[0] in single}
    if change["status"] == TicketStatus.CLOSED.value:
        actions.add(CLOSE_ACTION)
    needed = sorted(a for a in actions if writer.needs_confirmation(a))
    if needed:
        whole = replace(base, request_sha256=request_hash(NAME, {"token": plan_token, **change}))
        question = _question(change, [tid for tid, _ in plan])
        record = current_call.get()
        if (
            record is not None
            and record.protocol_version == "2026-07-28"
            and ctx.request_state is not None
        ):
            whole, confirmation = await writer.answered(ctx, needed[0], whole, "bulk")
            await writer.guarded(writer.writes.spend_confirmation(whole, plan[0][0]))
        elif await writer.guarded(_writes_any(base, plan, parts, change)):
            asked = await writer.ask(ctx, needed[0], question, whole, "bulk")
            if isinstance(asked, InputRequiredResult):
                return asked  # type: ignore[return-value]
            confirmation = asked
    done, skipped, failed = [], [], []
    for tid, version in plan:
        current: int | None = version
        changes = []
        applied: list[str] = []
        tags = None
        try:
            for part, tool, operation, args in parts:
                wctx = contexts(base, tool, tid, part, args, current, change)
                try:
                    outcome, _ = await writer.run(
                        operation, wctx, confirmation, tid, *args, passing=(NoChange,)
                    )
                except NoChange:  # already as asked (the dry run left it out): no write
                    continue
                current = outcome.version
                applied.append(part)
                changes += [
                    Change(field=c.field, old_value=c.old_value, new_value=c.new_value)
                    for c in outcome.changes
                ]
                tags = _tags(outcome.classification) or tags
        except ToolError as exc:
            cause = exc.__cause__
            done_before = f" ({', '.join(applied)} written before this)" if applied else ""
            if isinstance(exc, UnavailableError):
                # The rest cannot be written either: listed, with what was written.
                rest = [t for t, _ in plan[plan.index((tid, version)) :]]
                failed += [
                    Failed(
                        id=t,
                        reason="Not written: the ticket database became unavailable"
                        + (done_before if t == tid else "")
                        + ". Run a new dry run later.",
                    )
                    for t in rest
                ]
                break
            if isinstance(cause, StaleVersion) and current == version:
                skipped.append(Failed(id=tid, reason="Changed since the dry run; not written."))
            else:
                failed.append(Failed(id=tid, reason=f"{exc}{done_before}"))
            continue
        if not applied:  # every part already as asked, since the dry run
            skipped.append(Failed(id=tid, reason="Already as asked; nothing written."))
            continue
        done.append(
            Planned(
                id=tid,
                version=current or version,
                changes=changes,
                adds=[p for p in ("note", "reply") if change[p] is not None],
                tags=tags,
            )
        )
    return _result(BulkResult(dry_run=False, tickets=done, skipped=skipped, failed=failed))


async def _writes_any(
    base: WriteContext,
    plan: list[tuple[str, int]],
    parts: list[tuple[Part, str, Any, tuple[Any, ...]]],
    change: dict[str, Any],
) -> bool:
    """Whether the confirmed run of ``plan`` would write anything: the writes' own checks
    (no lock, no write), in the run's order. Not when every part is a replay of its key
    or already as asked, or every ticket refuses (changed since the dry run): then nobody
    is asked to confirm it."""
    for tid, version in plan:
        current = version
        for part, tool, operation, args in parts:
            wctx = contexts(base, tool, tid, part, args, current, change)
            try:
                checked = await operation(wctx, tid, *args, audit=None)
            except NoChange:
                continue
            except WriteRefused:
                break  # the run stops this ticket here too
            if checked.replay is None:
                return True
            current = checked.replay.version
    return False


def _tags(classified: dict[str, Any] | None) -> TagsChanged | None:
    """The tags before and after, from a tag change's result (None: not one)."""
    if not classified or "tags" not in classified.get("after", {}):
        return None
    return TagsChanged(before=classified["before"]["tags"], after=classified["after"]["tags"])


def _derived_key(key: str | None, ticket_id: str, part: str) -> str | None:
    """The idempotency key of one ticket's part of a bulk change with ``key``: the key,
    or its SHA-256 when the whole would pass the keys' 128 characters."""
    if key is None:
        return None
    derived = f"{key}:{ticket_id}:{part}"
    if len(derived) > 128:
        derived = f"{hashlib.sha256(key.encode()).hexdigest()[:48]}:{ticket_id}:{part}"
    return derived[:128]


QUESTION_IDS = 20
"""Most ticket ids a bulk change's confirmation question names (then how many more)."""


def _question(change: dict[str, Any], ids: list[str]) -> str:
    """What the person confirming a bulk change reads: the tickets (by id), the change,
    and the text of a reply or note in full."""
    said = ", ".join(
        f"{k} {v!r}" for k, v in change.items() if v is not None and k not in ("reply", "note")
    )
    named = ", ".join(ids[:QUESTION_IDS])
    if len(ids) > QUESTION_IDS:
        named += f" and {len(ids) - QUESTION_IDS} more"
    lines = [f"Apply this change to {len(ids)} tickets ({named})? {said}".rstrip()]
    if change["reply"] is not None:
        lines += ["", "Reply every customer receives:", change["reply"]]
    if change["note"] is not None:
        lines += ["", "Internal note:", change["note"]]
    return "\n".join(lines)


def _result(model: BaseModel) -> ToolResult:
    data = model.model_dump(mode="json")
    return ToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
    )


TOOL = write_tool(bulk_update_tickets, BULK, BulkResult)
"""``bulk_update_tickets``, added by ``build_server`` (not on a read-only server)."""
