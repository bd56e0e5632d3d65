"""Legacy (initialize) sessions over HTTP: how many each caller holds, the request ids
in flight in each, and a request whose client went away cancelled in its session.

The 2026-07-28 revision has no sessions; its requests never come here."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_server.access.callers import Caller
from ticket_server.transports.refusals import (
    TOO_MANY_REQUESTS,
    UNAUTHORIZED,
    id_key,
    jsonrpc_error,
    no_more_body,
    shown_id,
)


class SessionQuota:
    """The legacy sessions each caller holds, as the gate sees them opened (an
    ``initialize`` answered with an ``Mcp-Session-Id``), used and closed (DELETE, or a
    404 for a session the server has forgotten). A session with no request in flight
    for ``idle_seconds`` is gone, as the MCP SDK's session manager ends it then."""

    def __init__(self, per_caller: int, idle_seconds: float) -> None:
        self.per_caller, self.idle_seconds = per_caller, idle_seconds
        self.sessions: dict[
            str, dict[str, list[float]]
        ] = {}  # caller -> id -> [last seen, in flight]
        self.ids: dict[str, set[str]] = {}  # session id -> request ids in flight
        self.opening: dict[str, int] = {}  # caller -> initializes not yet answered

    def reserve(self, caller: str) -> bool:
        """Hold a place for a session ``caller`` is opening until ``unreserve``; False
        when its sessions and those being opened fill its quota. Checked and taken at
        once: initializes sent together must not all pass before one is counted."""
        if self.open_count(caller) + self.opening.get(caller, 0) >= self.per_caller:
            return False
        self.opening[caller] = self.opening.get(caller, 0) + 1
        return True

    def unreserve(self, caller: str) -> None:
        left = self.opening.get(caller, 0) - 1
        if left > 0:
            self.opening[caller] = left
        else:
            self.opening.pop(caller, None)

    def open_count(self, caller: str) -> int:
        held = self.sessions.get(caller, {})
        cutoff = monotonic() - self.idle_seconds
        for sid in [sid for sid, (seen, busy) in held.items() if not busy and seen < cutoff]:
            del held[sid]
        if not held:
            self.sessions.pop(caller, None)
        return len(held)

    def opened(self, caller: str, sid: str) -> None:
        self.sessions.setdefault(caller, {})[sid] = [monotonic(), 0]

    def claim(self, sid: str, key: str) -> bool:
        """Hold request id ``key`` in session ``sid`` until ``release``; False when a
        request in flight holds it already."""
        held = self.ids.setdefault(sid, set())
        if key in held:
            return False
        held.add(key)
        return True

    def release(self, sid: str, key: str) -> None:
        held = self.ids.get(sid)
        if held is not None:
            held.discard(key)
            if not held:
                del self.ids[sid]

    def begin(self, caller: str, sid: str) -> None:
        entry = self.sessions.get(caller, {}).get(sid)
        if entry is not None:
            entry[0], entry[1] = monotonic(), entry[1] + 1

    def end(self, caller: str, sid: str, closed: bool) -> None:
        held = self.sessions.get(caller, {})
        entry = held.get(sid)
        if entry is None:
            return
        if closed:
            del held[sid]
        else:
            entry[0], entry[1] = monotonic(), entry[1] - 1


class LegacySessions:
    """Serves one request of a legacy session to ``app`` (the gate's checks passed): only
    ``initialize`` opens a session, only for a caller that may call some tool, at most
    ``quota.per_caller`` at once (429); a request id in flight in the session is refused
    (-32600); a client gone before its answer has its request cancelled."""

    def __init__(
        self, app: ASGIApp, quota: SessionQuota, may_call_any: Callable[[Caller], Awaitable[bool]]
    ) -> None:
        self.app, self.quota, self.may_call_any = app, quota, may_call_any

    async def __call__(
        self,
        scope: Scope,
        receive: Receive,
        received: list[Message],
        send: Send,
        headers: dict[str, str],
        caller: Caller,
        message: Any,
        request_id: Any,
    ) -> None:
        """``received``: the request's messages read so far (its body), given to the app
        before anything ``receive`` brings."""
        sid = headers.get("mcp-session-id")
        if sid is None and scope["method"] in ("GET", "DELETE"):
            # Only initialize opens a session; the SDK would open one for this request too.
            await jsonrpc_error(
                400,
                -32600,
                f"Bad Request: {scope['method']} /mcp needs the Mcp-Session-Id "
                "header that the answer to initialize carried",
            )(scope, receive, send)
            return
        opening = (
            sid is None and isinstance(message, dict) and message.get("method") == "initialize"
        )
        if opening:
            if not await self.may_call_any(caller):
                await jsonrpc_error(
                    403,
                    UNAUTHORIZED,
                    "Forbidden: this caller's scopes allow no tool on this "
                    "server, so no session is opened. An operator grants scopes with "
                    "`ticket-server callers add|rotate`.",
                    request_id,
                )(scope, receive, send)
                return
            if not self.quota.reserve(caller.name):
                wait = max(1, round(self.quota.idle_seconds))
                await jsonrpc_error(
                    429,
                    TOO_MANY_REQUESTS,
                    f"Too many open sessions: this caller may hold {self.quota.per_caller} at once. Close one "
                    f"(DELETE /mcp with its Mcp-Session-Id) or let an idle one expire (within {wait} seconds).",
                    request_id,
                    headers={"Retry-After": str(wait)},
                    data={"retry_after_seconds": wait},
                )(scope, receive, send)
                return
        elif sid is not None:
            # A request id is the session's until its answer: the transport keys each
            # request's answer by it, so a second request with an id in flight would
            # take the first one's answer and leave the first waiting for ever.
            key = id_key(message) if scope["method"] == "POST" else None
            if key is not None and not self.quota.claim(sid, key):
                await jsonrpc_error(
                    400,
                    -32600,
                    f"Invalid Request: the id {shown_id(request_id)} is already in use by a "
                    "request of this session that has not been answered; send each request "
                    "with a new id",
                    request_id,
                )(scope, no_more_body, send)
                return
            self.quota.begin(caller.name, sid)
        status, finished, reserved = 0, False, opening

        async def watch(message: Message) -> None:
            nonlocal status, finished, reserved
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            if message["type"] == "http.response.start":
                status = message["status"]
                if opening and status == 200:
                    for key, value in message.get("headers", []):
                        if key.lower() == b"mcp-session-id":
                            self.quota.opened(caller.name, value.decode("latin-1"))
                if reserved:  # the session is counted as open now, or never opened
                    reserved = False
                    self.quota.unreserve(caller.name)
            await send(message)

        gone = anyio.Event()

        async def app_receive() -> Message:
            if received:
                return received.pop(0)
            await gone.wait()
            return {"type": "http.disconnect"}

        async def until_gone() -> None:
            """The client closing its connection before its answer: the request is
            cancelled in its session, as a ``notifications/cancelled`` would, so its
            task ends instead of running to an answer nobody reads."""
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            if not finished and sid is not None and id_key(message) is not None:
                await self._cancel(scope, request_id)

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(until_gone)
                await self.app(scope, app_receive, watch)
                tasks.cancel_scope.cancel()
            if status and not finished and not gone.is_set():
                # An SSE stream the server ended at shutdown: close it as a complete response.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if reserved:  # no answer was sent
                self.quota.unreserve(caller.name)
            if sid is not None:
                closed = status == 404 or (scope["method"] == "DELETE" and 200 <= status < 300)
                self.quota.end(caller.name, sid, closed)
                key = id_key(message) if scope["method"] == "POST" and not opening else None
                if key is not None:
                    self.quota.release(sid, key)

    async def _cancel(self, scope: Scope, request_id: Any) -> None:
        """Send the app, in the request's session, the ``notifications/cancelled`` its
        client would have sent; the answer (202) goes nowhere."""
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "the client closed the connection"},
            }
        ).encode()
        replaced = {b"content-length", b"content-type", b"accept"}
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in replaced] + [
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ]
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(_: Message) -> None:
            pass

        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self.app({**scope, "headers": headers}, receive, discard)
