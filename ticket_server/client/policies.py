"""Requests a server makes of the client, and the application's policies for them.

Elicitation (form and URL modes) goes to the approver (none: declined); its answer is
checked against the requested schema (``True`` confirms only a one-question yes/no
form). ``sampling/createMessage`` goes to the sampling policy (none: refused),
``roots/list`` to the roots policy (none: refused). Each is logged with the tool and
arguments of the call it came from: on 2026-07-28 the request runs in the calling task;
on a legacy connection the call is known only when it is the one in flight, else every
candidate is named. While a person is asked, the clock of every such call stops.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import re
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from pydantic import ValidationError

from ticket_server.client.audit import Audit, current_trace_id, ms
from ticket_server.client.config import Envelope
from ticket_server.client.session import _Request
from ticket_server.client.tools import problems, schema_validator


@dataclass(frozen=True)
class ApprovalRequest:
    """What a policy callback decides on.

    ``kind="call"``: the kit is about to call a tool whose envelope asks for a person
    (``reasons`` names which fields: ``human_controlled``, ``side_effecting``).
    ``kind="elicitation"``: the server asks a person while a call runs; ``message`` and
    ``requested_schema`` (form mode) or ``url`` (URL mode: the person is to open it)
    are the server's words, not the kit's. ``kind="sampling"``: the server asks for a
    model completion (``params``: the ``sampling/createMessage`` params as JSON).
    ``kind="roots"``: the server asks which roots it may see.

    ``tool`` and ``arguments`` name the call the request came from; when several calls
    to that server were in flight and the protocol does not say which one asked,
    ``tool`` is None and ``candidates`` lists them all."""

    kind: Literal["call", "elicitation", "sampling", "roots"]
    server: str
    tool: str | None
    arguments: Mapping[str, Any] | None
    envelope: Envelope | None
    reasons: tuple[str, ...]
    trace_id: str
    message: str | None = None
    requested_schema: Mapping[str, Any] | None = None
    mode: Literal["form", "url"] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    params: Mapping[str, Any] | None = None
    candidates: tuple[tuple[str, Mapping[str, Any]], ...] = ()


# The application's decision: True (approve; for a form elicitation: confirm, allowed
# only when the form is one yes/no question), False (refuse / decline), or for a form
# elicitation a dict: the content to send, checked against the requested schema (a
# field the schema does not name declines the form: nothing unasked for is sent).
Approval = bool | dict[str, Any]
Approver = Callable[[ApprovalRequest], Approval | Awaitable[Approval]]
# A sampling policy: the ``CreateMessageResult`` to send (a dict or the model), or None
# to refuse. A roots policy: the root URIs to show, or None (or False) to refuse.
SamplingPolicy = Callable[[ApprovalRequest], Any]
RootsPolicy = Sequence[str] | Callable[[ApprovalRequest], Any]
ProgressCallback = Callable[[float, float | None, str | None], Any]


@dataclass(eq=False)
class _Call:
    """One call in flight: what it is, and its deadline budget."""

    tool: str
    arguments: Mapping[str, Any]
    trace_id: str
    deadline: float  # anyio clock; moves later while a person answers the server
    person_seconds: float = 0.0
    request: _Request[Any] | None = None
    _asking: int = 0
    _asked_at: float = 0.0

    def remaining(self) -> float:
        return self.deadline - anyio.current_time()

    def track(self, request: _Request[Any] | None) -> None:
        self.request = request
        if request is not None and self._asking:
            request.hold()

    def person_asked(self) -> None:
        """A person is being asked: the call's clock stops until ``person_answered``."""
        self._asking += 1
        if self._asking == 1:
            self._asked_at = anyio.current_time()
            if self.request is not None:
                self.request.hold()

    def person_answered(self) -> None:
        self._asking -= 1
        if self._asking == 0:
            waited = anyio.current_time() - self._asked_at
            self.person_seconds += waited
            self.deadline += waited
            if self.request is not None:
                self.request.release(self.deadline)


_current_call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "kit_current_call", default=None
)


# What JSON leaves raw when not kept to ASCII but a terminal may act on: DEL and the C1
# controls (U+009B is CSI, an escape sequence's start); escaped as JSON escapes C0 ones.
_RAW_CONTROLS = re.compile("[\x7f-\x9f]")


def _shown_json(value: Any) -> str:
    """``value`` as JSON for a terminal: non-ASCII text kept readable, no control raw."""
    text = json.dumps(value, ensure_ascii=False)
    return _RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


async def ask_on_terminal(request: ApprovalRequest) -> Approval:
    """An approval callback for command-line applications: the question on stderr, the
    answer (y/N) from stdin, read in a worker thread so the event loop keeps running.
    A form elicitation with more than one yes/no question is declined (a terminal
    prompt cannot fill it); a URL elicitation shows the URL to open."""
    if request.kind == "call":
        question = (
            f"Allow {request.server}.{request.tool}({_shown_json(dict(request.arguments or {}))})"
            f" [{', '.join(request.reasons)}; {'reversible' if request.envelope and request.envelope.reversible else 'irreversible'}]? [y/N] "
        )
    elif request.kind == "elicitation" and request.mode == "url":
        question = (
            f"Server {request.server} (during {request.tool or 'a call'}) asks you to open "
            f"{request.url!r} (its words: {request.message!r}). Open it and continue? [y/N] "
        )
    elif request.kind == "elicitation":
        question = (
            f"Server {request.server} (during {request.tool or 'a call'}) asks (its words): "
            f"{request.message!r}. Confirm? [y/N] "
        )
    else:
        return False
    print(question, end="", file=sys.stderr, flush=True)
    answer = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    return answer.strip().lower() in ("y", "yes")


def progress_callback(
    audit: Audit,
    server: str,
    tool: str,
    call: _Call,
    *callbacks: ProgressCallback | None,
) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    """The progress callback sent with every call (so a progressToken is sent): each
    notification logged under the call's turn, then given to the application."""
    wanted = [c for c in callbacks if c is not None]

    async def progress(value: float, total: float | None, message: str | None) -> None:
        audit.emit(
            "progress",
            server=server,
            trace_id=call.trace_id,
            tool=tool,
            progress=value,
            total=total,
            message=message,
        )
        for callback in wanted:
            answer = callback(value, total, message)
            if inspect.isawaitable(answer):
                await answer

    return progress


def _form_value(name: Any, value: Any) -> bool:
    """Whether ``name: value`` is a field an elicitation answer can carry (MCP's form
    values: text, a number, a boolean, a list of text, or null)."""
    if not isinstance(name, str):
        return False
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return value is None or isinstance(value, (str, int, float, bool))


class ServerRequests:
    """The kit's answers to a server's requests (mixed into ``Kit``)."""

    approve: Approver | None
    sample: SamplingPolicy | None
    roots: RootsPolicy | None
    audit: Audit
    _in_flight: dict[str, list[_Call]]

    async def _ask(self, policy: Callable[[ApprovalRequest], Any], request: ApprovalRequest) -> Any:
        """``policy(request)`` awaited; None when it raised (logged by type only: its
        text may hold anything, and it reaches neither the model nor the server)."""
        try:
            answer = policy(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            self.audit.emit(
                "policy_error",
                server=request.server,
                tool=request.tool,
                kind=request.kind,
                error=type(exc).__name__,
            )
            return None
        return answer

    def _origin(self, server: str) -> tuple[_Call | None, tuple[_Call, ...]]:
        """The call a server's request came from: on 2026-07-28 the request runs in the
        calling task; on a legacy connection it is known only when one call is in flight
        (else every candidate is returned)."""
        current = _current_call.get()
        if current is not None:
            return current, (current,)
        in_flight = tuple(self._in_flight.get(server, []))
        return (in_flight[0] if len(in_flight) == 1 else None), in_flight

    def _request(
        self, kind: Literal["elicitation", "sampling", "roots"], server: str, **fields: Any
    ) -> tuple[ApprovalRequest, tuple[_Call, ...]]:
        origin, candidates = self._origin(server)
        request = ApprovalRequest(
            kind=kind,
            server=server,
            tool=origin.tool if origin else None,
            arguments=origin.arguments if origin else None,
            envelope=None,
            reasons=("server asks",),
            trace_id=origin.trace_id if origin else current_trace_id(),
            candidates=() if origin else tuple((c.tool, c.arguments) for c in candidates),
            **fields,
        )
        return request, candidates

    def _log_request(self, request: ApprovalRequest, **fields: Any) -> None:
        self.audit.emit(
            request.kind,
            server=request.server,
            trace_id=request.trace_id,
            tool=request.tool,
            candidates=[tool for tool, _ in request.candidates] or None,
            **fields,
        )

    def _elicitation_for(self, server: str) -> Callable[..., Awaitable[Any]]:
        async def elicit(context: Any, params: Any) -> Any:
            from mcp_types import ElicitResult

            mode = getattr(params, "mode", None) or "form"
            requested: Any = getattr(params, "requested_schema", None)
            schema: Any = (
                requested.model_dump(by_alias=True, exclude_none=True)
                if hasattr(requested, "model_dump")
                else requested
            )
            request, candidates = self._request(
                "elicitation",
                server,
                message=getattr(params, "message", None),
                requested_schema=schema if mode == "form" else None,
                mode="url" if mode == "url" else "form",
                url=getattr(params, "url", None),
                elicitation_id=getattr(params, "elicitation_id", None),
            )
            asked = anyio.current_time()
            for call in candidates:  # a person's time never counts against a call
                call.person_asked()
            try:
                answer: Any = (
                    False if self.approve is None else await self._ask(self.approve, request)
                )
            finally:
                for call in candidates:
                    call.person_answered()
            waited = anyio.current_time() - asked
            action, content, why = self._elicitation_answer(request, schema, answer)
            self._log_request(
                request,
                mode=request.mode,
                url=request.url,
                action=action,
                why=why,
                fields=sorted(content) if content else None,
                person_ms=ms(waited),
            )
            if action == "accept" and mode == "url":
                return ElicitResult(action="accept")
            if action == "accept":
                return ElicitResult(action="accept", content=content)
            return ElicitResult(action="decline")

        return elicit

    @staticmethod
    def _elicitation_answer(
        request: ApprovalRequest, schema: Any, answer: Any
    ) -> tuple[str, dict[str, Any] | None, str | None]:
        """(action, content, why it was declined) for an approver's answer."""
        if answer is None:
            return "decline", None, "the approval callback failed"
        if answer is False:
            return "decline", None, "refused"
        if request.mode == "url":
            if answer is True:
                return "accept", None, None
            return "decline", None, "a URL elicitation takes True or False"
        schema = schema if isinstance(schema, dict) else {}
        properties = schema.get("properties") or {}
        if answer is True:
            # True confirms one yes/no question; it never fills a form or ticks a box the
            # person did not see as the question (terms, consent, a second flag).
            if not properties:
                return "accept", {}, None
            if len(properties) == 1:
                ((name, sub),) = properties.items()
                if isinstance(sub, dict) and sub.get("type") == "boolean":
                    return "accept", {name: True}, None
            return "decline", None, "the form has fields a yes cannot fill: answer with a dict"
        if not isinstance(answer, dict):
            return "decline", None, f"an answer of type {type(answer).__name__} is not a form"
        cannot = sorted(str(k) for k, v in answer.items() if not _form_value(k, v))
        if cannot:
            return (
                "decline",
                None,
                "a form carries text, numbers, booleans and lists of text under text names: "
                + ", ".join(cannot),
            )
        try:
            found = problems(schema_validator(schema), answer) if schema else []
        except Exception:  # the server's schema is not one JSON Schema can apply
            return "decline", None, "the requested schema cannot be checked, so no answer is sent"
        if schema.get("additionalProperties") is not False:  # else JSON Schema named them
            # An open schema lets any other key pass: the form asked for none of them.
            extra = [
                f"{k}: not a field of this form" for k in sorted(answer) if k not in properties
            ]
            found = extra + found
        if found:
            return (
                "decline",
                None,
                "the answer does not fit the requested schema: " + "; ".join(found),
            )
        return "accept", answer, None

    def _sampling_for(self, server: str) -> Callable[..., Awaitable[Any]]:
        async def sample(context: Any, params: Any) -> Any:
            from mcp_types import CreateMessageResult, ErrorData

            body = params.model_dump(by_alias=True, mode="json", exclude_none=True)
            request, _ = self._request("sampling", server, params=body)
            answer = None if self.sample is None else await self._ask(self.sample, request)
            if answer is not None and not isinstance(answer, CreateMessageResult):
                try:
                    answer = CreateMessageResult.model_validate(answer)
                except ValidationError:
                    self._log_request(
                        request,
                        outcome="refused",
                        why="the policy's answer is not a CreateMessageResult",
                    )
                    return ErrorData(code=-1, message="sampling refused by the client")
            if answer is None:
                why = "no sampling policy" if self.sample is None else "refused by the policy"
                self._log_request(
                    request, outcome="refused", why=why, messages=len(body.get("messages", []))
                )
                return ErrorData(code=-1, message="sampling refused by the client")
            self._log_request(
                request,
                outcome="answered",
                model=answer.model,
                messages=len(body.get("messages", [])),
            )
            return answer

        return sample

    def _roots_for(self, server: str) -> Callable[..., Awaitable[Any]]:
        async def roots(context: Any) -> Any:
            from mcp_types import ErrorData, ListRootsResult, Root

            request, _ = self._request("roots", server)
            policy = self.roots
            chosen: Any
            if policy is None:
                chosen = None
            elif callable(policy):
                chosen = await self._ask(policy, request)
            else:
                chosen = policy if isinstance(policy, str) else list(policy)
            if isinstance(chosen, str):  # one URI, not one root per character
                chosen = [chosen]
            if chosen is False:  # the approver's "no"
                chosen = None
            if chosen is not None and not isinstance(chosen, (list, tuple, set, frozenset)):
                self._log_request(
                    request, outcome="refused", why="the policy's answer is not a list of URIs"
                )
                return ErrorData(code=-1, message="roots refused by the client")
            if chosen is None:
                why = "no roots policy" if policy is None else "refused by the policy"
                self._log_request(request, outcome="refused", why=why)
                return ErrorData(code=-1, message="roots refused by the client")
            self._log_request(request, outcome="answered", roots=[str(r) for r in chosen])
            return ListRootsResult(roots=[Root.model_validate({"uri": str(r)}) for r in chosen])

        return roots
