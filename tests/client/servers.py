"""Small MCP servers for the client kit's tests, over stdio: ``python servers.py KIND``.

- ``plain``: ``echo(text)`` and ``slow(seconds)``; ``die()`` exits the process mid-call,
  ``stall()`` never answers (the process stays up); ``flaky(marker)`` exits mid-call the
  first time and later answers with the call's idempotency key; ``exit_after_answer()``
  answers, then exits.
- ``grow``: ``echo`` plus ``add_tool(name)``, which registers a new tool at runtime
  (and sends ``notifications/tools/list_changed`` on a legacy connection).
- ``confirm``: ``refund(amount)`` asks for a person's confirmation first: by elicitation
  on a legacy connection, by an ``InputRequiredResult`` on a 2026-07-28 one;
  ``ask_form(schema)`` asks for a form of any JSON Schema the same ways.
- ``mute``: reads requests and never answers anything, not even the handshake.
- ``slowlist``: ``echo``; every ``tools/list`` after the first takes 5 s.

``plain`` also has ``pair(a: int, b: bool)`` and ``nested(inner)`` (an object that
allows no other keys) for argument checks, ``log(text)`` (a logging notification
mid-call) and ``whoami()`` (the client's name and version from a legacy handshake).

Our own server has no write tools yet, so ``confirm`` stands in for their confirmation.
"""

from __future__ import annotations

import os
import sys

import anyio
from fastmcp import Context, FastMCP
from pydantic import BaseModel, ConfigDict


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int


def plain():

    mcp = FastMCP("kit-test-plain", version="1.0.0")

    @mcp.tool(annotations={"readOnlyHint": True})
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool
    async def slow(seconds: float) -> str:
        """Wait, then answer."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @mcp.tool
    def die() -> str:
        """Exit the server process without answering."""
        os._exit(3)

    @mcp.tool
    def flaky(marker: str, ctx: Context) -> str:
        """Exit mid-call the first time (creating the file MARKER); later, answer with the
        idempotency key the call carried in `_meta`."""
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)
        meta = ctx.request_context.meta or {}
        meta = meta if isinstance(meta, dict) else meta.model_dump(by_alias=True)
        return str(meta.get("dev.ticket-server/idempotency-key"))

    @mcp.tool
    async def exit_after_answer() -> str:
        """Answer, then exit the server process (between calls, for the client)."""
        import asyncio

        asyncio.get_running_loop().call_later(0.2, os._exit, 0)
        return "bye"

    @mcp.tool
    async def stall() -> str:
        """Never answer."""
        await anyio.sleep_forever()
        return "unreachable"

    @mcp.tool
    def pair(a: int, b: bool) -> str:
        """Echo an integer and a boolean."""
        return f"{a!r} {b!r}"

    @mcp.tool
    def nested(inner: Inner) -> str:
        """Echo a closed object."""
        return repr(inner.x)

    @mcp.tool
    async def log(text: str, ctx: Context) -> str:
        """Send TEXT as a logging notification, then answer."""
        await ctx.info(text, extra={"detail": text})
        return "logged"

    @mcp.tool
    def whoami(ctx: Context) -> str:
        """The client's name and version, as its legacy handshake said."""
        info = ctx.session.client_params.client_info
        return f"{info.name} {info.version}"

    return mcp


def slowlist():
    from fastmcp.server.middleware import Middleware

    class SlowList(Middleware):
        listed = 0

        async def on_list_tools(self, context, call_next):
            SlowList.listed += 1
            if SlowList.listed > 1:
                await anyio.sleep(5)
            return await call_next(context)

    mcp = FastMCP("kit-test-slowlist", middleware=[SlowList()])

    @mcp.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return mcp


def grow():

    mcp = FastMCP("kit-test-grow")

    @mcp.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool
    async def add_tool(name: str, ctx: Context) -> str:
        """Register a tool called NAME that answers its own name."""

        def added() -> str:
            return name

        mcp.tool(added, name=name, description=f"Added at runtime: {name}.")
        if not ctx.request_context.protocol_version.startswith("2026"):
            # 2026-07-28 has no session to notify: a client learns by listing again.
            from mcp_types import ToolListChangedNotification

            await ctx.send_notification(ToolListChangedNotification())
        return f"added {name}"

    return mcp


def confirm():
    from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

    mcp = FastMCP("kit-test-confirm")
    question = {
        "type": "object",
        "properties": {"confirm": {"type": "boolean"}},
        "required": ["confirm"],
    }

    @mcp.tool(annotations={"destructiveHint": True})
    async def refund(amount: int, ctx: Context):
        """Refund AMOUNT cents, after a person confirms."""
        message = f"Refund {amount} cents?"
        if ctx.request_context.protocol_version.startswith("2026"):
            answers = ctx.input_responses
            if not answers:
                return InputRequiredResult(
                    input_requests={
                        "confirm": ElicitRequest(
                            params=ElicitRequestFormParams(
                                message=message, requested_schema=question
                            )
                        )
                    }
                )
            answer = answers["confirm"]
            accepted = answer.action == "accept" and bool((answer.content or {}).get("confirm"))
        else:
            result = await ctx.elicit(message, response_type=bool)
            accepted = result.action == "accept" and bool(result.data)
        return f"refunded {amount}" if accepted else "refund cancelled"

    @mcp.tool
    async def ask_form(schema: str, ctx: Context):
        """Ask a person to fill a form of the JSON Schema SCHEMA (given as JSON text, so a
        malformed one can be sent); answer with the action and the content received."""
        import json

        requested = json.loads(schema)
        if ctx.request_context.protocol_version.startswith("2026"):
            answers = ctx.input_responses
            if not answers:
                params = ElicitRequestFormParams(message="Fill in", requested_schema=requested)
                return InputRequiredResult(input_requests={"form": ElicitRequest(params=params)})
            answer = answers["form"]
        else:
            answer = await ctx.session.elicit_form("Fill in", requested)
        return f"{answer.action} {json.dumps(answer.content)}"

    return mcp


def mute():
    for _ in sys.stdin:
        pass


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "mute":
        mute()
    else:
        {"plain": plain, "grow": grow, "confirm": confirm, "slowlist": slowlist}[kind]().run(
            show_banner=False
        )
