"""The write tools: add_internal_note, reply_to_customer, set_ticket_status, assign_ticket,
escalate_ticket (scope ``tickets:write``, on the caller's queues).

Each call is one transaction of ``tickets.writes``: the change, its history events, its
idempotency key and its audit row (``audit_events`` with ``change``: before/after,
idempotency key, confirmation outcome) commit together; the call pipeline then writes no
second row for it. An internal note and a reply are different tools with different
result shapes, so a note is never sent to the customer by mistake.

Confirmation (``Settings.confirm_writes``, or the caller's own list; default a reply and
closing a ticket; ``set_ticket_status`` confirms closing too): first the write's checks
run in one read (a refusal answers at once; an idempotency replay returns the first
result, nobody asked); then, in one form (``CONFIRM_SCHEMA``) naming what will change, on
the legacy revision the server asks the person through ``elicitation/create`` (the call's
deadline waits for the answer), and on 2026-07-28 the call answers with an
``input_required`` result and sealed request state (``access.sealing.SignedClaims``), and the
retry carries the answer. A
declined or cancelled confirmation changes nothing and spends its request state. A
request state that fails verification (FastMCP's outer seal, handed over by
``compat.hand_invalid_request_state_to``, or ours) is refused here, in the call
pipeline, so the refusal is audited. A client that cannot ask (no elicitation
capability) gets an ``isError`` and nothing is written.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from fastmcp import Context
from fastmcp.dependencies import Depends
from fastmcp.exceptions import ToolError
from fastmcp.tools import ToolResult
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

from ticket_server import compat
from ticket_server.access.context import current_call
from ticket_server.access.policy import ToolPolicy
from ticket_server.access.sealing import SignedClaims
from ticket_server.tickets.domain import (
    DatabaseUnavailable,
    EventField,
    TicketPriority,
    TicketStatus,
    Visibility,
    WriteRefused,
)
from ticket_server.tools.attachment_shapes import AttachmentInfo
from ticket_server.tools.attachments import (
    AttachmentsArg,
    attached_files,
    digests,
    files_for,
)
from ticket_server.tools.declare import write_tool
from ticket_server.tools.errors import CONTROL_CHARACTERS, UnavailableError, model_error
from ticket_server.tools.full_read import meta_for
from ticket_server.tools.lookup import MAX_ID_LENGTH, normalise_ticket_id
from ticket_server.tools.services import Services, current_services

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ticket_server.tickets.repository import TicketRepository
    from ticket_server.tickets.writes import Checked, TicketWrites, WriteContext, WriteOutcome

T = TypeVar("T")
IDEMPOTENCY_META = "dev.ticket-server/idempotency-key"
REPLAY_META = "dev.ticket-server/replay"
CANNOT_CONFIRM = (
    "This action needs a person's confirmation, which this client cannot give; nothing was "
    "changed. Ask the person to do it in the helpdesk, or use a client that supports elicitation."
)
NO_BACK_CHANNEL = (
    "This action needs a person's confirmation, and this connection cannot carry the question "
    "(an HTTP request that does not accept text/event-stream, or a stateless server); nothing "
    "was changed. Send the call with `Accept: application/json, text/event-stream` in a session, "
    "or use the 2026-07-28 revision."
)
CLOSE_ACTION = "close_ticket"
"""The confirmation action of ``set_ticket_status`` to ``closed`` (``set_ticket_status`` in
a policy confirms it too)."""
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {
            "type": "boolean",
            "title": "Confirm",
            "description": "true: make this change; false: do not.",
        }
    },
    "required": ["confirm"],
}
"""The one confirmation form, on both revisions."""
MAX_KEY = 128
_CONTROL = re.compile(CONTROL_CHARACTERS)
OWNER = re.compile(r"^[a-z0-9][a-z0-9._@-]{0,63}$")
"""An owner login as stored (after folding to lower case)."""
MAX_TEXT = 10_000
CONFIRM_SECONDS = 300
"""How long a person's confirmation may take (the sealed request state's expiry)."""
CONFIRM_REQUEST = "confirm"
INVALID_REQUEST_STATE = "invalid"
"""What a tool finds as its request state when the one the client sent failed the SDK's
verification (``compat.hand_invalid_request_state_to``): refused here, so audited."""
AUDIT_DIGESTS = {
    "add_internal_note": ("note", "attachments"),
    "reply_to_customer": ("reply", "attachments"),
    "escalate_ticket": ("reason",),
    "open_ticket": ("subject", "body", "requester_email", "requester_name", "attachments"),
}
"""Arguments the audit keeps as SHA-256 and length only: the comment row holds the text
(an opened ticket and its requester row hold theirs); attachments are redacted there (the
write's ``change`` holds each file's digest)."""
POLICY = {
    name: ToolPolicy(digests=fields, files="attachments" if "attachments" in fields else None)
    for name, fields in AUDIT_DIGESTS.items()
}
"""What the call pipeline applies to these tools (``access/policy.py``; every write
counts against its caller's share, declared or not)."""

# Annotations: none of these deletes anything; a note, a reply or an escalation repeated
# adds another one (not idempotent); setting a status or an owner again is a no-op
# refusal. Only the reply reaches outside the ticket database: the customer.
NOTE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
)
REPLY = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True
)
UPDATE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False
)
ESCALATE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False
)

TicketId = Annotated[str, Field(max_length=MAX_ID_LENGTH, description="Ticket id, e.g. SUP-4412.")]
Body = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
Key = Annotated[
    Annotated[str, Field(min_length=1, max_length=MAX_KEY)] | None,
    Field(
        description="Any unique string; retrying with the same key and arguments returns the first result."
    ),
]
Version = Annotated[
    Annotated[int, Field(ge=1)] | None,
    Field(description="The version you read (get_ticket); refused if the ticket changed since."),
]


# --- result shapes (documented in the tools' descriptions) ---------------------------


class TicketState(BaseModel):
    id: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    version: int
    updated_at: datetime


class Change(BaseModel):
    field: EventField
    old_value: str | None
    new_value: str | None


class NoteAdded(BaseModel):
    ticket: TicketState
    note_id: int
    visibility: Literal["internal"]
    attachments: list[AttachmentInfo] = []


class ReplySent(BaseModel):
    ticket: TicketState
    reply_id: int
    visibility: Literal["public"]
    attachments: list[AttachmentInfo] = []


class TicketChanged(BaseModel):
    ticket: TicketState
    changes: list[Change]


def ticket_state(outcome: WriteOutcome) -> TicketState:
    """The ticket's state after a write, as write results show it."""
    return TicketState(
        id=outcome.ticket_id,
        status=outcome.status,
        priority=outcome.priority,
        owner=outcome.owner,
        queue=outcome.queue,
        version=outcome.version,
        updated_at=outcome.updated_at,
    )


def _changes(outcome: WriteOutcome) -> list[Change]:
    return [
        Change(field=c.field, old_value=c.old_value, new_value=c.new_value) for c in outcome.changes
    ]


def _changed(outcome: WriteOutcome) -> TicketChanged:
    return TicketChanged(ticket=ticket_state(outcome), changes=_changes(outcome))


def _result(model: BaseModel, replayed: bool) -> ToolResult:
    """A write tool's result: ``model`` as ``structuredContent`` and as JSON text; its
    ``_meta`` labels customer-written text in it (``meta_for``) and marks a replay."""
    data = model.model_dump(mode="json")
    meta = dict(meta_for(data) or {})
    if replayed:
        meta[REPLAY_META] = True
    return ToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
        meta=meta or None,
    )


def request_hash(tool: str, arguments: dict[str, Any]) -> str:
    """SHA-256 of the tool and its arguments without the idempotency key (what a key is
    bound to: the same key with other arguments is refused)."""
    shown = {k: v for k, v in arguments.items() if k != "idempotency_key" and v is not None}
    return hashlib.sha256(
        json.dumps([tool, shown], sort_keys=True, default=str).encode()
    ).hexdigest()


class Writer:
    """Runs one write tool call: the checks, confirmation, the transaction with its audit
    row, the mapping of refusals to ``isError`` results."""

    def __init__(
        self, repository: TicketRepository, confirm: frozenset[str], key: Callable[[], bytes]
    ) -> None:
        self.repository = repository
        self.confirm = confirm
        self.states = SignedClaims(key)
        self._writes: TicketWrites | None = None

    @property
    def writes(self) -> TicketWrites:
        # SQLAlchemy is imported on the first write, not when the server is built.
        if self._writes is None:
            from ticket_server.tickets.writes import TicketWrites

            self._writes = TicketWrites(self.repository)
        return self._writes

    def context(
        self,
        ctx: Context,
        tool: str,
        arguments: dict[str, Any],
        key: str | None,
        expected_version: int | None,
    ) -> WriteContext:
        from ticket_server.tickets.writes import WriteContext

        record = current_call.get()
        caller = record.caller if record is not None else None
        if caller is None:  # the pipeline admits no call without one; fail closed
            raise ToolError("No caller: nothing was changed.")
        if key is None:
            # The client kit sends the key in the request's _meta (a mapping): one that
            # cannot be used is refused, never dropped (a retry would then write twice).
            meta = ctx.request_context.meta if ctx.request_context is not None else None
            if meta and IDEMPOTENCY_META in meta:
                key = _meta_key(meta[IDEMPOTENCY_META])
        return WriteContext(
            actor=caller.name,
            tool=tool,
            request_sha256=request_hash(tool, arguments),
            queues=caller.writable_queues,
            idempotency_key=key,
            expected_version=expected_version,
            by_assistant=caller.is_assistant,
        )

    def needs_confirmation(self, action: str) -> bool:
        """Whether the caller's policy (or the deployment's) confirms ``action``; closing
        (``close_ticket``) is confirmed by ``close_ticket`` or by ``set_ticket_status``."""
        record = current_call.get()
        caller = record.caller if record is not None else None
        policy = (
            caller.confirm_writes
            if caller is not None and caller.confirm_writes is not None
            else self.confirm
        )
        if action == CLOSE_ACTION:
            return bool({CLOSE_ACTION, "set_ticket_status"} & policy)
        return action in policy

    async def ask(
        self, ctx: Context, action: str, question: str, wctx: WriteContext, ticket_id: str
    ) -> str | InputRequiredResult:
        """Ask the person (the checks passed): "accepted", or (2026-07-28) the
        ``InputRequiredResult`` to send; raises ``ToolError`` (nothing written) when the
        person does not accept or the client cannot ask."""
        rc = ctx.request_context
        capabilities = rc.session.client_capabilities if rc is not None else None
        if capabilities is None or capabilities.elicitation is None:
            _note(f"confirmation unavailable ({action})")
            raise model_error(CANNOT_CONFIRM)
        record = current_call.get()
        if record is not None and record.protocol_version == "2026-07-28":
            claims = {
                "c": wctx.actor,
                "t": wctx.tool,
                "k": ticket_id,
                "h": wctx.request_sha256,
                "e": int(time.time()) + CONFIRM_SECONDS,
                "n": secrets.token_urlsafe(16),
            }
            ask = ElicitRequest(
                params=ElicitRequestFormParams(message=question, requested_schema=CONFIRM_SCHEMA)
            )
            _note(f"confirmation requested ({action})")
            return InputRequiredResult(
                input_requests={CONFIRM_REQUEST: ask}, request_state=self.states.seal(claims)
            )
        if record is not None and record.deadline is not None:
            # The person's time is not the tool's: the call may wait for the answer as long
            # as a 2026-07-28 confirmation's request state lives.
            compat.reschedule(record.deadline, CONFIRM_SECONDS)
        session = ctx.session
        if not session.can_send_request:
            _note(f"confirmation unavailable ({action})")
            raise model_error(NO_BACK_CHANNEL)
        try:
            answer = await session.elicit_form(
                question, CONFIRM_SCHEMA, related_request_id=ctx.request_id
            )
        except NoBackChannelError as exc:
            _note(f"confirmation unavailable ({action})")
            raise model_error(NO_BACK_CHANNEL) from exc
        except MCPError as exc:  # the client answered the request with an error
            _note(f"confirmation failed ({action})")
            raise model_error(
                "The client could not ask the person to confirm; nothing was changed."
            ) from exc
        return _decided(action, answer.action, answer.content)

    async def answered(
        self, ctx: Context, action: str, wctx: WriteContext, ticket_id: str
    ) -> tuple[WriteContext, str]:
        """2026-07-28, the retry carrying the person's answer and the sealed state:
        ``(wctx with the state's single-use nonce, "accepted")``; raises ``ToolError``
        when the state is not valid or the person did not accept (the nonce is then
        spent, so the state cannot confirm a write later)."""
        state = ctx.request_state
        if state == INVALID_REQUEST_STATE:
            _note(f"confirmation state invalid ({action})")
            raise model_error(
                "The request state is not valid (altered, expired, or sent with other arguments); "
                "nothing was changed. Call the tool again without request state to ask the person "
                "afresh."
            )
        binding = {"c": wctx.actor, "t": wctx.tool, "k": ticket_id, "h": wctx.request_sha256}
        claims = self.states.unseal(state) if state is not None else None
        if claims is None or any(claims.get(k) != v for k, v in binding.items()):
            _note(f"confirmation state invalid ({action})")
            raise model_error(
                "The confirmation does not match this request; nothing was changed. Call the tool "
                "again to ask the person afresh."
            )
        expires = claims.get("e")
        if not isinstance(expires, int) or expires <= time.time():
            _note(f"confirmation expired ({action})")
            raise model_error(
                "The confirmation expired; nothing was changed. Call the tool again to ask afresh."
            )
        responses = ctx.input_responses or {}
        answer = responses.get(CONFIRM_REQUEST)
        wctx = replace(wctx, confirmation_nonce=str(claims.get("n")))
        try:
            return wctx, _decided(
                action, getattr(answer, "action", "cancel"), getattr(answer, "content", None)
            )
        except ToolError:  # spent, so this state cannot confirm a write later
            await self.guarded(self.writes.spend_confirmation(wctx, ticket_id))
            raise

    @staticmethod
    async def guarded(work: Awaitable[T], *, passing: tuple[type[WriteRefused], ...] = ()) -> T:
        """``await work``, a refusal made an ``isError`` (its reason noted for the audit);
        one of ``passing`` is raised as it is, for a caller that handles it itself."""
        try:
            return await work
        except passing:
            raise
        except WriteRefused as exc:
            _note(exc.reason)
            raise model_error(str(exc)) from exc
        except DatabaseUnavailable as exc:
            raise UnavailableError() from exc

    async def perform(
        self,
        ctx: Context,
        tool: str,
        ticket_id: str,
        arguments: dict[str, Any],
        key: str | None,
        expected_version: int | None,
        question: Callable[[Checked], str],
        operation: Any,
        *args: Any,
        shape: Callable[[Any], BaseModel | Awaitable[BaseModel]],
        action: str | None = None,
    ) -> ToolResult:
        """One write tool call, whole: its context; when ``action`` (default: ``tool``)
        needs a person's confirmation, the checks (a refusal or an idempotency replay
        answers at once, nobody asked), then ``question(checked)`` put to the person; then
        ``operation(wctx, ticket_id, *args, audit=...)``. Returns the tool's result,
        ``shape(outcome)`` as ``structuredContent`` (a replay marked in ``_meta``), or the
        2026-07-28 input request that asks the person (FastMCP sends it as such)."""
        done = await self._perform(
            ctx,
            tool,
            ticket_id,
            arguments,
            key,
            expected_version,
            question,
            operation,
            *args,
            action=action,
        )
        if isinstance(done, InputRequiredResult):
            return done  # type: ignore[return-value]  # FastMCP sends it as the input request
        outcome, replayed = done
        model = shape(outcome)
        return _result(await model if inspect.isawaitable(model) else model, replayed)

    async def _perform(
        self,
        ctx: Context,
        tool: str,
        ticket_id: str,
        arguments: dict[str, Any],
        key: str | None,
        expected_version: int | None,
        question: Callable[[Checked], str],
        operation: Any,
        *args: Any,
        action: str | None,
    ) -> tuple[WriteOutcome, bool] | InputRequiredResult:
        wctx = self.context(
            ctx,
            tool,
            {"ticket_id": ticket_id, **arguments, "expected_version": expected_version},
            key,
            expected_version,
        )
        action = action or tool
        confirmation = "not required"
        if self.needs_confirmation(action):
            record = current_call.get()
            modern = record is not None and record.protocol_version == "2026-07-28"
            if modern and ctx.request_state is not None:
                wctx, confirmation = await self.answered(ctx, action, wctx, ticket_id)
            else:
                checked = await self.guarded(operation(wctx, ticket_id, *args, audit=None))
                if checked.replay is not None:
                    _note("replay")
                    return checked.replay, True
                asked = await self.ask(ctx, action, question(checked), wctx, ticket_id)
                if isinstance(asked, InputRequiredResult):
                    return asked
                confirmation = asked
        return await self.run(operation, wctx, confirmation, ticket_id, *args)

    async def run(
        self,
        operation: Any,
        ctx: WriteContext,
        confirmation: str,
        *args: Any,
        passing: tuple[type[WriteRefused], ...] = (),
    ) -> tuple[WriteOutcome, bool]:
        """``operation`` run as one audited write (``guarded``: ``passing`` as there)."""
        record = current_call.get()

        def audit(conn: Connection, outcome: WriteOutcome) -> None:
            from sqlalchemy import insert

            from ticket_server.access.models import AuditEvent

            if record is None:  # no call to audit: the write must not happen
                raise RuntimeError("a write outside a tools/call")
            diff = outcome.classification or {}  # tags and custom fields
            before = {c.field.value: c.old_value for c in outcome.changes} | diff.get("before", {})
            after: dict[str, Any] = {c.field.value: c.new_value for c in outcome.changes}
            after |= diff.get("after", {})
            if outcome.comment is not None:
                after["comment"] = {
                    "id": outcome.comment.id,
                    "visibility": outcome.comment.visibility.value,
                }
            if outcome.attachments:  # digests only, never the bytes
                after["attachments"] = [
                    {"id": a.id, "name": a.name, "media_type": a.media_type, "size": a.size}
                    | {"sha256": a.sha256}
                    for a in outcome.attachments
                ]
            change = {
                "ticket_id": outcome.ticket_id,
                "version": outcome.version,
                "before": before,
                "after": after,
                "idempotency_key": ctx.idempotency_key,
                "confirmation": confirmation,
            }
            # The call is not over: its duration so far and no result size yet; the
            # audit writer sets both on this row once the call ends (``AuditWriter``).
            record.duration_ms = round((time.monotonic() - record.started) * 1000, 3)
            row = record.as_row(datetime.now(UTC))
            done = conn.execute(
                insert(AuditEvent.__table__).values(
                    **row, change=json.dumps(change, ensure_ascii=False)
                )
            )
            record.audited = True
            key = done.inserted_primary_key
            record.audit_pk = int(key[0]) if key is not None else None

        outcome, replayed = await self.guarded(operation(ctx, *args, audit=audit), passing=passing)
        if replayed:
            _note("replay")
        return outcome, replayed


def _decided(action: str, outcome: str, content: Mapping[str, Any] | None) -> str:
    """ "accepted" for an accepted form whose ``confirm`` is true; raises ``ToolError``
    (noted for the audit) for a decline, a cancel, ``confirm: false`` or an answer of
    another shape."""
    if outcome == "accept":
        answer = (content or {}).get("confirm")
        if answer is True:
            return "accepted"
        if answer is not False:
            _note(f"confirmation answer not understood ({action})")
            keys = ", ".join(sorted(map(str, content or {}))) or "nothing"
            raise model_error(
                f"The confirmation answer held {keys}, not confirm: true or false; nothing was "
                "changed. Call the tool again and answer the form's confirm field."
            )
        outcome = "decline"  # accepted the form, answered "no"
    _note(
        f"confirmation {outcome}d ({action})"
        if outcome == "decline"
        else f"confirmation cancelled ({action})"
    )
    raise model_error(f"The person did not confirm ({outcome}); nothing was changed.")


def _meta_key(value: Any) -> str:
    """The idempotency key sent in ``_meta``, or a ``ToolError`` saying why it is refused."""
    if not isinstance(value, str):
        _note("idempotency key refused")
        raise model_error(
            f"_meta[{IDEMPOTENCY_META!r}] must be a string, not {type(value).__name__}; nothing "
            "was changed. Send the key as a string of 1 to 128 characters."
        )
    if not 0 < len(value) <= MAX_KEY or _CONTROL.search(value):
        _note("idempotency key refused")
        raise model_error(
            f"_meta[{IDEMPOTENCY_META!r}] must be 1 to {MAX_KEY} characters without control "
            f"characters (it has {len(value)}); nothing was changed."
        )
    return value


def _question(title: str, checked: Checked, text: str | None = None) -> str:
    """What the person is asked: the action, each field it changes (old -> new), the text."""
    lines = [title]
    if checked.changes:
        lines.append(
            "Changes: "
            + "; ".join(
                f"{c.field.value} {c.old_value or 'none'} -> {c.new_value or 'none'}"
                for c in checked.changes
            )
        )
    if text is not None:
        lines += ["", text]
    return "\n".join(lines)


def _not_blank(name: str, text: str) -> str:
    if not text.strip():
        _note(f"blank {name}")
        raise model_error(f"{name} is blank; give the text. Nothing was changed.")
    return text


def _owner(owner: str | None) -> str | None:
    """A login as stored: folded to lower case, in ``OWNER``'s alphabet (else refused)."""
    if owner is None:
        return None
    login = owner.strip().lower()
    if not OWNER.match(login):
        _note("invalid owner")
        raise model_error(
            f"owner {owner[:64]!r} is not a login: use 1 to 64 of a-z, 0-9, '.', '_', '-' and "
            "'@', starting with a letter or digit (case is ignored), or null to unassign. "
            "Nothing was changed."
        )
    return login


def _note(detail: str) -> None:
    record = current_call.get()
    if record is not None:
        record.detail = detail


async def _writable_queue(repo: TicketRepository, queue: str) -> str:
    """The queue ``queue`` names among those the caller may write (every queue that
    exists when it may write anywhere), folded as a search's queue filter is; else a
    ``ToolError`` naming them."""
    from ticket_server.tickets.analyzer import fold
    from ticket_server.tickets.directory import list_queues

    record = current_call.get()
    caller = record.caller if record is not None else None
    writable = caller.writable_queues if caller is not None else frozenset()
    every = await repo.read(list_queues)  # the queues table (revision 0012)
    active = [q.name for q in every if q.active]
    known = [q for q in active if writable is None or q in writable]
    wanted = fold(queue.strip())
    found = [q for q in known if fold(q) == wanted] if wanted else []
    if len(found) == 1:
        return found[0]
    yours = ", ".join(known) or "none"
    if any(fold(q.name) == wanted and not q.active for q in every):
        _note("inactive queue")
        raise model_error(
            f"Queue {queue[:64]!r} is inactive and takes no tickets; use one of: {yours}. "
            "Nothing was changed."
        )
    if wanted and writable is not None:
        elsewhere = [q for q in active if fold(q) == wanted]
        if elsewhere:
            _note("queue not writable")
            raise model_error(
                f"This caller may not write in queue {elsewhere[0]!r}, so the ticket cannot be "
                f"moved there; it may write in: {yours}. Nothing was changed."
            )
    _note("unknown queue")
    raise model_error(
        f"There is no queue {queue[:64]!r} among the queues you may write: {yours}. "
        "Use one of these names; nothing was changed."
    )


async def add_internal_note(
    ticket_id: TicketId,
    note: Annotated[Body, Field(description="Note for agents only; the customer never sees it.")],
    ctx: Context,
    idempotency_key: Key = None,
    expected_version: Version = None,
    attachments: AttachmentsArg = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Add an internal note (agents only, never sent to the customer); the one write a
    closed ticket takes. Blank text is refused. Returns the ticket's new state and the
    note id."""
    return await _comment(
        ctx,
        services,
        "add_internal_note",
        ticket_id,
        ("note", note),
        Visibility.INTERNAL,
        "Add this internal note to {}?",
        attachments,
        idempotency_key,
        expected_version,
    )


async def reply_to_customer(
    ticket_id: TicketId,
    reply: Annotated[Body, Field(description="Message the customer receives.")],
    ctx: Context,
    idempotency_key: Key = None,
    expected_version: Version = None,
    attachments: AttachmentsArg = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Send a public reply: the CUSTOMER receives it. Not for internal notes; refused on
    a closed ticket and for blank text. May ask the person to confirm first. Returns
    the ticket's new state and the reply id."""
    return await _comment(
        ctx,
        services,
        "reply_to_customer",
        ticket_id,
        ("reply", reply),
        Visibility.PUBLIC,
        "Send this reply to the customer of {}?",
        attachments,
        idempotency_key,
        expected_version,
    )


async def _comment(
    ctx: Context,
    services: Services,
    tool: str,
    ticket_id: str,
    text: tuple[str, str],
    visibility: Visibility,
    question: str,
    attachments: Any,
    idempotency_key: str | None,
    expected_version: int | None,
) -> ToolResult:
    """An internal note or a public reply: ``text`` is (its argument's name, the text),
    ``question`` what the person confirms, ``{}`` standing for the ticket id."""
    tid = normalise_ticket_id(ticket_id)
    name, body = text
    _not_blank(name, body)
    files_in = await files_for(services.files, attachments)
    writer = services.write

    def shape(outcome: WriteOutcome) -> NoteAdded | ReplySent:
        state, files, comment = (
            ticket_state(outcome),
            attached_files(outcome.attachments),
            outcome.comment,
        )
        assert comment is not None  # add_comment's outcome carries the comment it added
        if visibility is Visibility.INTERNAL:
            return NoteAdded(
                ticket=state, note_id=comment.id, visibility="internal", attachments=files
            )
        return ReplySent(ticket=state, reply_id=comment.id, visibility="public", attachments=files)

    return await writer.perform(
        ctx,
        tool,
        tid,
        {name: body, "attachments": digests(files_in)},
        idempotency_key,
        expected_version,
        lambda checked: _question(question.format(tid), checked, body),
        writer.writes.add_comment,
        body,
        visibility,
        files_in,
        shape=shape,
    )


async def set_ticket_status(
    ticket_id: TicketId,
    status: TicketStatus,
    ctx: Context,
    idempotency_key: Key = None,
    expected_version: Version = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Move a ticket to another status; an illegal move is an error naming the allowed
    next statuses (closed is final: internal notes only). Closing may ask the person
    to confirm (policy action close_ticket, or set_ticket_status)."""
    tid = normalise_ticket_id(ticket_id)
    writer = services.write
    return await writer.perform(
        ctx,
        "set_ticket_status",
        tid,
        {"status": status.value},
        idempotency_key,
        expected_version,
        lambda checked: _question(
            f"Close {tid}? A closed ticket is final (internal notes only)."
            if status is TicketStatus.CLOSED
            else f"Set the status of {tid} to {status.value}?",
            checked,
        ),
        writer.writes.set_status,
        status,
        shape=_changed,
        action=CLOSE_ACTION if status is TicketStatus.CLOSED else None,
    )


async def assign_ticket(
    ticket_id: TicketId,
    owner: Annotated[
        Annotated[str, Field(min_length=1, max_length=64)] | None,
        Field(description="Assignee login (a-z, 0-9, . _ - @; case ignored); null unassigns."),
    ],
    ctx: Context,
    idempotency_key: Key = None,
    expected_version: Version = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Assign a ticket to an owner (login), or unassign it with null; refused on a
    closed ticket."""
    tid = normalise_ticket_id(ticket_id)
    login = _owner(owner)
    writer = services.write
    return await writer.perform(
        ctx,
        "assign_ticket",
        tid,
        {"owner": login or ""},
        idempotency_key,
        expected_version,
        lambda checked: _question(f"Assign {tid} to {login or 'nobody'}?", checked),
        writer.writes.assign,
        login,
        shape=_changed,
    )


async def escalate_ticket(
    ticket_id: TicketId,
    reason: Annotated[
        str, Field(min_length=1, max_length=2_000, description="Why; kept as an internal note.")
    ],
    ctx: Context,
    priority: TicketPriority | None = None,
    queue: Annotated[
        Annotated[str, Field(min_length=1, max_length=64)] | None,
        Field(description="Target queue, e.g. engineering (one you may write; case ignored)."),
    ] = None,
    idempotency_key: Key = None,
    expected_version: Version = None,
    services: Services = Depends(current_services),
) -> ToolResult:
    """Escalate: change priority and/or move to another queue (one you may write in;
    an unknown queue is an error listing yours), with a reason kept as an internal
    note. Refused on a closed ticket."""
    tid = normalise_ticket_id(ticket_id)
    if priority is None and queue is None:
        _note("nothing to change")
        raise model_error("Give a priority, a queue, or both; nothing was changed.")
    _not_blank("reason", reason)
    writer = services.write
    target = (
        await writer.guarded(_writable_queue(services.repository, queue))
        if queue is not None
        else None
    )
    arguments = {
        "reason": reason,
        "priority": priority.value if priority else None,
        "queue": target,
    }
    return await writer.perform(
        ctx,
        "escalate_ticket",
        tid,
        arguments,
        idempotency_key,
        expected_version,
        lambda checked: _question(f"Escalate {tid}?", checked, f"Reason: {reason}"),
        writer.writes.escalate,
        priority,
        target,
        reason,
        shape=_changed,
    )


TOOLS = [
    write_tool(add_internal_note, NOTE, NoteAdded),
    write_tool(reply_to_customer, REPLY, ReplySent),
    write_tool(set_ticket_status, UPDATE, TicketChanged),
    write_tool(assign_ticket, UPDATE, TicketChanged),
    write_tool(escalate_ticket, ESCALATE, TicketChanged),
]
"""The note, reply, status, assignment and escalation tools, added by ``build_server``
(not on a read-only server)."""
