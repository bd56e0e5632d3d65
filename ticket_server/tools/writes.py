"""The write tools: add_internal_note, reply_to_customer, set_ticket_status, assign_ticket,
escalate_ticket (scope ``tickets:write``, on the caller's queues).

Each call is one transaction of ``tickets.writes``: the change, its history events, its
idempotency key and its audit row (``audit_events`` with ``change``: before/after,
idempotency key, confirmation outcome) commit together; the call pipeline then writes no
second row for it. An internal note and a reply are different tools with different
result shapes, so a note is never sent to the customer by mistake.

Confirmation (``Settings.confirm_writes``, or the caller's own list; default a reply and
closing a ticket): on the legacy revision the server asks the person through
``elicitation/create``; on 2026-07-28 the call answers with an ``input_required`` result
and sealed request state (``ConfirmationState``), and the retry carries the answer. A
declined or cancelled confirmation changes nothing and spends its request state. A
request state that fails verification (FastMCP's outer seal, handed over by
``compat.hand_invalid_request_state_to``, or ours) is refused here, in the call
pipeline, so the refusal is audited. A client that cannot ask (no elicitation
capability) gets an ``isError`` and nothing is written.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools import ToolResult
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

from ticket_server.access.context import current_call
from ticket_server.tickets.domain import (
    DatabaseUnavailable,
    EventField,
    TicketPriority,
    TicketStatus,
    Visibility,
    WriteRefused,
)
from ticket_server.tools.errors import UnavailableError
from ticket_server.tools.lookup import MAX_ID_LENGTH, normalise_ticket_id

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ticket_server.tickets.repository import TicketRepository
    from ticket_server.tickets.writes import TicketWrites, WriteContext, WriteOutcome

T = TypeVar("T")
WRITE_SCOPE = "tickets:write"
IDEMPOTENCY_META = "dev.ticket-server/idempotency-key"
REPLAY_META = "dev.ticket-server/replay"
CANNOT_CONFIRM = (
    "This action needs a person's confirmation, which this client cannot give; nothing was "
    "changed. Ask the person to do it in the helpdesk, or use a client that supports elicitation."
)
MAX_TEXT = 10_000
CONFIRM_SECONDS = 300
"""How long a person's confirmation may take (the sealed request state's expiry)."""
CONFIRM_REQUEST = "confirm"
INVALID_REQUEST_STATE = "invalid"
"""What a tool finds as its request state when the one the client sent failed the SDK's
verification (``compat.hand_invalid_request_state_to``): refused here, so audited."""
TOOLS = (
    "add_internal_note",
    "reply_to_customer",
    "set_ticket_status",
    "assign_ticket",
    "escalate_ticket",
)
AUDIT_DIGESTS = {"add_internal_note": ("note",), "reply_to_customer": ("reply",)}
"""Arguments the audit keeps as SHA-256 and length only: the comment row holds the text."""

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
    Annotated[str, Field(min_length=1, max_length=128)] | None,
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


class ReplySent(BaseModel):
    ticket: TicketState
    reply_id: int
    visibility: Literal["public"]


class TicketChanged(BaseModel):
    ticket: TicketState
    changes: list[Change]


def _state(outcome: WriteOutcome) -> TicketState:
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


def _result(model: BaseModel, replayed: bool) -> ToolResult:
    data = model.model_dump(mode="json")
    return ToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
        meta={REPLAY_META: True} if replayed else None,
    )


def request_hash(tool: str, arguments: dict[str, Any]) -> str:
    """SHA-256 of the tool and its arguments without the idempotency key (what a key is
    bound to: the same key with other arguments is refused)."""
    shown = {k: v for k, v in arguments.items() if k != "idempotency_key" and v is not None}
    return hashlib.sha256(
        json.dumps([tool, shown], sort_keys=True, default=str).encode()
    ).hexdigest()


class ConfirmationState:
    """The request state of a confirmation on the 2026-07-28 revision: what was asked,
    for whom, until when, with a single-use nonce, under HMAC-SHA256 with the server's
    key. (FastMCP also seals the state on the wire; this binding is ours: caller,
    tool, ticket, the hash of the arguments, and the nonce that makes it single-use.)"""

    def __init__(self, key: Callable[[], bytes]) -> None:
        self._server_key = key  # read on the first confirmation, not at start

    @functools.cached_property
    def key(self) -> bytes:
        return hashlib.sha256(b"ticket-server confirmation\0" + self._server_key()).digest()

    def seal(self, claims: dict[str, Any]) -> str:
        payload = base64.urlsafe_b64encode(json.dumps(claims, sort_keys=True).encode()).decode()
        return payload + "." + hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest()

    def unseal(self, token: str) -> dict[str, Any] | None:
        """The claims, or None when ``token`` was not made by ``seal`` with this key."""
        payload, _, tag = token.rpartition(".")
        expected = hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest()
        if not payload or not hmac.compare_digest(tag, expected):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(payload.encode()))
        except ValueError:
            return None
        return claims if isinstance(claims, dict) else None


class Writer:
    """Runs one write tool call: confirmation, the transaction with its audit row, the
    mapping of refusals to ``isError`` results."""

    def __init__(
        self, repository: TicketRepository, confirm: frozenset[str], key: Callable[[], bytes]
    ) -> None:
        self.repository = repository
        self.confirm = confirm
        self.states = ConfirmationState(key)
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
            # The client kit sends the key in the request's _meta (a mapping).
            meta = ctx.request_context.meta if ctx.request_context is not None else None
            value = meta.get(IDEMPOTENCY_META) if meta else None
            if isinstance(value, str) and 0 < len(value) <= 128:
                key = value
        return WriteContext(
            actor=caller.name,
            tool=tool,
            request_sha256=request_hash(tool, arguments),
            queues=caller.writable_queues,
            idempotency_key=key,
            expected_version=expected_version,
        )

    async def confirmed(
        self,
        ctx: Context,
        action: str,
        question: str,
        wctx: WriteContext,
        ticket_id: str,
    ) -> tuple[WriteContext, str] | InputRequiredResult:
        """``(wctx, "not required" | "accepted")`` (``wctx`` then carries the single-use
        nonce of a 2026-07-28 confirmation), or (2026-07-28, first round) the
        ``InputRequiredResult`` asking the person; raises ``ToolError`` (nothing written;
        the pipeline audits the refusal) when the person declines or cancels, when the
        client cannot ask, or when the returned request state is not valid."""
        record = current_call.get()
        caller = record.caller if record is not None else None
        policy = (
            caller.confirm_writes
            if caller is not None and caller.confirm_writes is not None
            else self.confirm
        )
        if action not in policy:
            return wctx, "not required"
        rc = ctx.request_context
        capabilities = rc.session.client_capabilities if rc is not None else None
        if capabilities is None or capabilities.elicitation is None:
            _note(f"confirmation unavailable ({action})")
            raise ToolError(CANNOT_CONFIRM)
        if record is None or record.protocol_version != "2026-07-28":
            answer = await ctx.elicit(question, response_type=bool)
            outcome = answer.action
            # accepted the form, answered "no"
            if outcome == "accept" and getattr(answer, "data", None) is not True:
                outcome = "decline"
            return wctx, self._answered(action, outcome)
        binding = {"c": wctx.actor, "t": wctx.tool, "k": ticket_id, "h": wctx.request_sha256}
        state = ctx.request_state
        if state is None:
            claims = {
                **binding,
                "e": int(time.time()) + CONFIRM_SECONDS,
                "n": secrets.token_urlsafe(16),
            }
            schema = {
                "type": "object",
                "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
                "required": ["confirm"],
            }
            ask = ElicitRequest(
                params=ElicitRequestFormParams(message=question, requested_schema=schema)
            )
            _note(f"confirmation requested ({action})")
            return InputRequiredResult(
                input_requests={CONFIRM_REQUEST: ask}, request_state=self.states.seal(claims)
            )
        if state == INVALID_REQUEST_STATE:
            _note(f"confirmation state invalid ({action})")
            raise ToolError(
                "The request state is not valid (altered, expired, or sent with other arguments); "
                "nothing was changed. Call the tool again without request state to ask the person "
                "afresh."
            )
        sealed = self.states.unseal(state)
        if sealed is None or any(sealed.get(k) != v for k, v in binding.items()):
            _note(f"confirmation state invalid ({action})")
            raise ToolError(
                "The confirmation does not match this request; nothing was changed. Call the tool "
                "again to ask the person afresh."
            )
        expires = sealed.get("e")
        if not isinstance(expires, int) or expires <= time.time():
            _note(f"confirmation expired ({action})")
            raise ToolError(
                "The confirmation expired; nothing was changed. Call the tool again to ask afresh."
            )
        responses = ctx.input_responses or {}
        response = responses.get(CONFIRM_REQUEST)
        outcome = getattr(response, "action", "cancel")
        content = getattr(response, "content", None) or {}
        if outcome == "accept" and content.get("confirm") is not True:
            outcome = "decline"
        wctx = replace(wctx, confirmation_nonce=str(sealed.get("n")))
        if outcome != "accept":  # spent, so this state cannot confirm a write later
            await self.guarded(self.writes.spend_confirmation(wctx, ticket_id))
        return wctx, self._answered(action, outcome)

    @staticmethod
    async def guarded(work: Awaitable[T]) -> T:
        """``await work``, a refusal made an ``isError`` (its reason noted for the audit)."""
        try:
            return await work
        except WriteRefused as exc:
            _note(exc.reason)
            raise ToolError(str(exc)) from exc
        except DatabaseUnavailable as exc:
            raise UnavailableError() from exc

    @staticmethod
    def _answered(action: str, outcome: str) -> str:
        if outcome != "accept":
            _note(
                f"confirmation {outcome}d ({action})"
                if outcome == "decline"
                else f"confirmation cancelled ({action})"
            )
            raise ToolError(f"The person did not confirm ({outcome}); nothing was changed.")
        return "accepted"

    async def perform(
        self,
        ctx: Context,
        tool: str,
        ticket_id: str,
        arguments: dict[str, Any],
        key: str | None,
        expected_version: int | None,
        question: str,
        operation: Any,
        *args: Any,
        action: str | None = None,
    ) -> tuple[WriteOutcome, bool] | InputRequiredResult:
        """One write call: its context, the confirmation ``action`` (default: ``tool``)
        needs, then ``operation(wctx, ticket_id, *args)``; or the input request to send."""
        wctx = self.context(
            ctx,
            tool,
            {"ticket_id": ticket_id, **arguments, "expected_version": expected_version},
            key,
            expected_version,
        )
        asked = await self.confirmed(ctx, action or tool, question, wctx, ticket_id)
        if isinstance(asked, InputRequiredResult):
            return asked
        wctx, confirmation = asked
        return await self.run(operation, wctx, confirmation, ticket_id, *args)

    async def run(
        self, operation: Any, ctx: WriteContext, confirmation: str, *args: Any
    ) -> tuple[WriteOutcome, bool]:
        record = current_call.get()

        def audit(conn: Connection, outcome: WriteOutcome) -> None:
            from sqlalchemy import insert

            from ticket_server.access.models import AuditEvent

            if record is None:  # no call to audit: the write must not happen
                raise RuntimeError("a write outside a tools/call")
            before = {c.field.value: c.old_value for c in outcome.changes}
            after: dict[str, Any] = {c.field.value: c.new_value for c in outcome.changes}
            if outcome.comment is not None:
                after["comment"] = {
                    "id": outcome.comment.id,
                    "visibility": outcome.comment.visibility.value,
                }
            change = {
                "ticket_id": outcome.ticket_id,
                "version": outcome.version,
                "before": before,
                "after": after,
                "idempotency_key": ctx.idempotency_key,
                "confirmation": confirmation,
            }
            # The call is not over: its duration so far; its result size is not known yet.
            record.duration_ms = round((time.monotonic() - record.started) * 1000, 3)
            row = record.as_row(datetime.now(UTC))
            conn.execute(
                insert(AuditEvent.__table__).values(
                    **row, change=json.dumps(change, ensure_ascii=False)
                )
            )
            record.audited = True

        outcome, replayed = await self.guarded(operation(ctx, *args, audit=audit))
        if replayed:
            _note("replay")
        return outcome, replayed


def _note(detail: str) -> None:
    record = current_call.get()
    if record is not None:
        record.detail = detail


def register(
    mcp: FastMCP, repo: TicketRepository, confirm: frozenset[str], key: Callable[[], bytes]
) -> None:
    """Add the write tools to ``mcp``; ``confirm``: the actions needing a person's
    confirmation; ``key``: the secret sealing confirmation request state."""
    writer = Writer(repo, confirm, key)
    tags = {WRITE_SCOPE}

    @mcp.tool(
        name="add_internal_note",
        annotations=NOTE,
        tags=tags,
        output_schema=NoteAdded.model_json_schema(),
    )
    async def add_internal_note(
        ticket_id: TicketId,
        note: Annotated[
            Body, Field(description="Note for agents only; the customer never sees it.")
        ],
        ctx: Context,
        idempotency_key: Key = None,
        expected_version: Version = None,
    ) -> ToolResult:
        """Add an internal note (agents only, never sent to the customer). Returns the
        ticket's new state and the note id."""
        tid = normalise_ticket_id(ticket_id)
        done = await writer.perform(
            ctx,
            "add_internal_note",
            tid,
            {"note": note},
            idempotency_key,
            expected_version,
            f"Add an internal note to {tid}?",
            writer.writes.add_comment,
            note,
            Visibility.INTERNAL,
        )
        if isinstance(done, InputRequiredResult):
            return done  # type: ignore[return-value]  # FastMCP sends it as the input request
        outcome, replayed = done
        assert outcome.comment is not None
        return _result(
            NoteAdded(ticket=_state(outcome), note_id=outcome.comment.id, visibility="internal"),
            replayed,
        )

    @mcp.tool(
        name="reply_to_customer",
        annotations=REPLY,
        tags=tags,
        output_schema=ReplySent.model_json_schema(),
    )
    async def reply_to_customer(
        ticket_id: TicketId,
        reply: Annotated[Body, Field(description="Message the customer receives.")],
        ctx: Context,
        idempotency_key: Key = None,
        expected_version: Version = None,
    ) -> ToolResult:
        """Send a public reply: the CUSTOMER receives it. Not for internal notes. May ask
        the person to confirm first. Returns the ticket's new state and the reply id."""
        tid = normalise_ticket_id(ticket_id)
        done = await writer.perform(
            ctx,
            "reply_to_customer",
            tid,
            {"reply": reply},
            idempotency_key,
            expected_version,
            f"Send this reply to the customer of {tid}?\n\n{reply}",
            writer.writes.add_comment,
            reply,
            Visibility.PUBLIC,
        )
        if isinstance(done, InputRequiredResult):
            return done  # type: ignore[return-value]
        outcome, replayed = done
        assert outcome.comment is not None
        return _result(
            ReplySent(ticket=_state(outcome), reply_id=outcome.comment.id, visibility="public"),
            replayed,
        )

    @mcp.tool(
        name="set_ticket_status",
        annotations=UPDATE,
        tags=tags,
        output_schema=TicketChanged.model_json_schema(),
    )
    async def set_ticket_status(
        ticket_id: TicketId,
        status: TicketStatus,
        ctx: Context,
        idempotency_key: Key = None,
        expected_version: Version = None,
    ) -> ToolResult:
        """Move a ticket to another status; an illegal move is an error naming the allowed
        next statuses (closed is final). Closing may ask the person to confirm."""
        tid = normalise_ticket_id(ticket_id)
        done = await writer.perform(
            ctx,
            "set_ticket_status",
            tid,
            {"status": status.value},
            idempotency_key,
            expected_version,
            f"Set {tid} to {status.value}?",
            writer.writes.set_status,
            status,
            action="close_ticket" if status is TicketStatus.CLOSED else None,
        )
        if isinstance(done, InputRequiredResult):
            return done  # type: ignore[return-value]
        outcome, replayed = done
        return _result(TicketChanged(ticket=_state(outcome), changes=_changes(outcome)), replayed)

    @mcp.tool(
        name="assign_ticket",
        annotations=UPDATE,
        tags=tags,
        output_schema=TicketChanged.model_json_schema(),
    )
    async def assign_ticket(
        ticket_id: TicketId,
        owner: Annotated[
            Annotated[str, Field(min_length=1, max_length=64)] | None,
            Field(description="Assignee login; null unassigns."),
        ],
        ctx: Context,
        idempotency_key: Key = None,
        expected_version: Version = None,
    ) -> ToolResult:
        """Assign a ticket to an owner (login), or unassign it with null."""
        tid = normalise_ticket_id(ticket_id)
        done = await writer.perform(
            ctx,
            "assign_ticket",
            tid,
            {"owner": owner or ""},
            idempotency_key,
            expected_version,
            f"Assign {tid} to {owner or 'nobody'}?",
            writer.writes.assign,
            owner,
        )
        if isinstance(done, InputRequiredResult):
            return done  # type: ignore[return-value]
        outcome, replayed = done
        return _result(TicketChanged(ticket=_state(outcome), changes=_changes(outcome)), replayed)

    @mcp.tool(
        name="escalate_ticket",
        annotations=ESCALATE,
        tags=tags,
        output_schema=TicketChanged.model_json_schema(),
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
            Field(description="Target queue, e.g. engineering."),
        ] = None,
        idempotency_key: Key = None,
        expected_version: Version = None,
    ) -> ToolResult:
        """Escalate: change priority and/or move to another queue (one you may write in),
        with a reason kept as an internal note."""
        tid = normalise_ticket_id(ticket_id)
        if priority is None and queue is None:
            raise ToolError("Give a priority, a queue, or both; nothing was changed.")
        arguments = {
            "reason": reason,
            "priority": priority.value if priority else None,
            "queue": queue,
        }
        done = await writer.perform(
            ctx,
            "escalate_ticket",
            tid,
            arguments,
            idempotency_key,
            expected_version,
            f"Escalate {tid}?",
            writer.writes.escalate,
            priority,
            queue,
            reason,
        )
        if isinstance(done, InputRequiredResult):
            return done  # type: ignore[return-value]
        outcome, replayed = done
        return _result(TicketChanged(ticket=_state(outcome), changes=_changes(outcome)), replayed)
