"""The kit's tool definitions, gatekeeper and executor: arguments checked before a call
leaves, pinned names (a tool added at runtime stays inert until pinned), the envelope
matrix, retries only for idempotent envelopes, and the server's confirmation requests
answered through the approval callback.

Our server has no write tools yet: servers.py's ``confirm`` server stands in for their
confirmation (elicitation on legacy connections, ``InputRequiredResult`` on 2026-07-28)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.client.conftest import REVISIONS, kit_server, ours_stdio
from ticket_server.client import KitConfig, ServerConfig, ToolConfig
from ticket_server.client.kit import ApprovalRequest, CallRefused, Kit
from ticket_server.client.session import ServerUnavailable
from ticket_server.client.tools import InvalidArguments

LOCKED_READ = {"surface": "locked", "side_effecting": False, "reversible": True}


def text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def kit_config(*servers: ServerConfig, permissions: tuple[str, ...] = ()) -> KitConfig:
    return KitConfig(servers={s.name: s for s in servers}, permissions=frozenset(permissions))


def plain(**fields) -> ServerConfig:
    fields.setdefault("envelope", LOCKED_READ)
    return ServerConfig(name="plain", transport="stdio", command=kit_server("plain"), **fields)


def confirming(name: str, tool: str, mode: str) -> ServerConfig:
    """The kit's test server that asks the person (``kit_server("confirm")``), offering
    ``tool``, on the ``mode`` revision."""
    return ServerConfig(
        name=name,
        transport="stdio",
        command=kit_server("confirm"),
        mode=mode,
        envelope=LOCKED_READ,
        tools={tool: ToolConfig()},
    )


class Approver:
    """An approval callback that answers ``answer`` and remembers what it was asked."""

    def __init__(
        self, answer: bool | dict = True, *, elicitation: bool | dict | None = None
    ) -> None:
        self.answer, self.asked = answer, []
        self.elicitation = answer if elicitation is None else elicitation

    async def __call__(self, request: ApprovalRequest):
        self.asked.append(request)
        return self.answer if request.kind == "call" else self.elicitation


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
async def test_our_tools_get_argument_models_and_bad_arguments_never_leave(
    db_path: Path, mode, revision, method
):
    config = ours_stdio(
        db_path,
        mode=mode,
        envelope=LOCKED_READ,
        tools={
            "get_ticket_status_v2": ToolConfig(),
            "search_tickets_v2": ToolConfig(visible=False),
        },
    )
    events: list[dict] = []
    async with Kit(kit_config(config), audit=events.append) as kit:
        listed = await kit.tools("tickets")
        assert {"get_ticket_status_v2", "search_tickets_v2"} <= {t.name for t in listed}
        assert [t.name for t in await kit.visible_tools()] == ["get_ticket_status_v2"]
        inert = [t.name for t in listed if not t.pinned]
        assert inert and "get_ticket_status" in inert

        with pytest.raises(InvalidArguments) as caught:
            await kit.call("tickets", "get_ticket_status_v2", {"ticket": "SUP-4412"})
        message = str(caught.value)
        assert message.startswith("invalid arguments for tickets.get_ticket_status_v2: ")
        assert (
            "ticket_id: Field required" in message
            and "ticket: not an argument of this tool" in message
        )
        assert not [e for e in events if e["event"] == "attempt"], (
            "bad arguments reached the server"
        )

        result = await kit.call(
            "tickets", "search_tickets_v2", {"query": "invoice"}
        )  # reachable, not shown
        assert not result.is_error
        result = await kit.call("tickets", "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert result.structured_content["id"] == "SUP-4412"
        assert kit.sessions["tickets"].handshake.method == method
        with pytest.raises(CallRefused, match="tickets.get_ticket_status is not pinned"):
            await kit.call("tickets", "get_ticket_status", {"ticket_id": "SUP-4412"})


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
async def test_a_tool_the_server_adds_later_stays_inert_until_pinned(mode, revision, method):
    grow = ServerConfig(
        name="grow",
        transport="stdio",
        command=kit_server("grow"),
        mode=mode,
        envelope=LOCKED_READ,
        tools={"echo": ToolConfig(), "add_tool": ToolConfig()},
    )
    async with Kit(kit_config(grow), audit=lambda e: None) as kit:
        assert [t.name for t in await kit.visible_tools()] == ["echo", "add_tool"]
        assert text(await kit.call("grow", "add_tool", {"name": "surprise"})) == "added surprise"
        listed = {t.name: t for t in await kit.tools("grow", refresh=True)}
        assert not listed["surprise"].pinned and not listed["surprise"].visible
        assert [t.name for t in await kit.visible_tools()] == ["echo", "add_tool"]
        with pytest.raises(
            CallRefused, match="grow.surprise is not pinned in the configuration: it stays inert"
        ):
            await kit.call("grow", "surprise", {})

        kit.pin("grow", "surprise")
        assert text(await kit.call("grow", "surprise", {})) == "surprise"
        assert "surprise" in [t.name for t in await kit.visible_tools()]


async def test_unknown_server_and_unknown_tool_are_refused():
    async with Kit(kit_config(plain(tools={"echo": ToolConfig()})), approve=Approver()) as kit:
        with pytest.raises(CallRefused, match="unknown server 'billing': not in the configuration"):
            await kit.call("billing", "echo", {"text": "x"})
        with pytest.raises(CallRefused, match="server plain has no tool 'nothing'"):
            await kit.call("plain", "nothing", {})


async def test_an_unlisted_tool_of_an_unpinned_server_gets_the_most_restrictive_envelope():
    approver = Approver(answer=False)
    async with Kit(kit_config(plain(pinned=False)), approve=approver, audit=lambda e: None) as kit:
        # `echo` is annotated readOnlyHint by the server: a hint, which loosens nothing.
        definition = await kit.definition("plain", "echo")
        assert (
            definition.envelope.surface == "human_controlled" and definition.envelope.side_effecting
        )
        with pytest.raises(CallRefused, match="a person refused the call"):
            await kit.call("plain", "echo", {"text": "x"})
    assert approver.asked[0].reasons == ("human_controlled", "side_effecting")


async def test_a_locked_read_runs_without_asking():
    approver = Approver()
    async with Kit(
        kit_config(plain(tools={"echo": ToolConfig()})), approve=approver, audit=lambda e: None
    ) as kit:
        assert text(await kit.call("plain", "echo", {"text": "x"})) == "x"
    assert approver.asked == []


@pytest.mark.parametrize("answer", [True, False])
async def test_a_human_controlled_call_goes_to_the_approval_callback(answer):
    approver = Approver(answer)
    events: list[dict] = []
    config = plain(tools={"echo": ToolConfig(surface="human_controlled")})
    async with Kit(kit_config(config), approve=approver, audit=events.append) as kit:
        if answer:
            assert text(await kit.call("plain", "echo", {"text": "ok"})) == "ok"
        else:
            with pytest.raises(CallRefused, match="plain.echo: a person refused the call"):
                await kit.call("plain", "echo", {"text": "no"})
    (asked,) = approver.asked
    assert (asked.kind, asked.tool, dict(asked.arguments), asked.reasons) == (
        "call",
        "echo",
        {"text": "ok" if answer else "no"},
        ("human_controlled",),
    )
    assert [e["outcome"] for e in events if e["event"] == "attempt"] == (["ok"] if answer else [])


@pytest.mark.parametrize("answer", ["no", "false", {"approved": False}, ["no"], 1])
async def test_only_true_approves_a_call(answer):
    """An approval callback's answer other than True (a "no" typed and returned as text,
    a dict meant for a form, a list) refuses the call: it never runs on a truthy value."""
    events: list[dict] = []
    config = plain(tools={"echo": ToolConfig(surface="human_controlled")})
    async with Kit(kit_config(config), approve=Approver(answer), audit=events.append) as kit:
        with pytest.raises(CallRefused, match=r"plain.echo: the approval callback answered a"):
            await kit.call("plain", "echo", {"text": "x"})
    assert [e for e in events if e["event"] == "attempt"] == []
    assert [e["approved"] for e in events if e["event"] == "approval"] == [False]


async def test_a_side_effecting_call_without_an_approver_is_refused_and_a_missing_permission_too():
    config = plain(
        tools={
            "echo": ToolConfig(side_effecting=True),
            "slow": ToolConfig(required_permission="clock:write"),
        }
    )
    async with Kit(kit_config(config, permissions=("tickets:read",)), audit=lambda e: None) as kit:
        with pytest.raises(
            CallRefused, match=r"needs a person's approval \(side_effecting\) and none can be asked"
        ):
            await kit.call("plain", "echo", {"text": "x"})
        with pytest.raises(CallRefused, match="needs permission 'clock:write'"):
            await kit.call("plain", "slow", {"seconds": 0})


async def test_an_idempotent_call_is_retried_with_one_idempotency_key(tmp_path):
    events: list[dict] = []
    config = plain(envelope={**LOCKED_READ, "idempotent": True}, tools={"flaky": ToolConfig()})
    async with Kit(kit_config(config), audit=events.append) as kit:
        result = await kit.call("plain", "flaky", {"marker": str(tmp_path / "once")})
    calls = [e for e in events if e["event"] == "attempt"]
    assert [(c["attempt"], c["outcome"]) for c in calls] == [(1, "failed"), (2, "ok")]
    assert re.fullmatch(r"[0-9a-f]{32}", text(result)), "the retry carried no idempotency key"


async def test_a_side_effecting_call_that_is_not_idempotent_is_never_retried(tmp_path):
    events: list[dict] = []
    approver = Approver()
    config = plain(tools={"flaky": ToolConfig(side_effecting=True, idempotent=False)})
    async with Kit(kit_config(config), approve=approver, audit=events.append) as kit:
        with pytest.raises(ServerUnavailable, match="went away"):
            await kit.call("plain", "flaky", {"marker": str(tmp_path / "once")})
        assert text(await kit.call("plain", "flaky", {"marker": str(tmp_path / "once")})) == "None"
    assert [(c["attempt"], c["outcome"]) for c in events if c["event"] == "attempt"] == [
        (1, "failed"),
        (1, "ok"),
    ]
    assert len(approver.asked) == 2


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
@pytest.mark.parametrize(
    ("answer", "outcome"), [(True, "refunded 250"), (False, "refund cancelled")]
)
async def test_the_servers_confirmation_request_goes_to_the_approval_callback(
    mode, revision, method, answer, outcome
):
    confirm = confirming("billing", "refund", mode)
    approver = Approver(True, elicitation=answer)
    async with Kit(kit_config(confirm), approve=approver, audit=lambda e: None) as kit:
        result = await kit.call("billing", "refund", {"amount": 250})
        assert kit.sessions["billing"].handshake.protocol_version == revision
    assert text(result) == outcome
    # The server annotates refund destructive: the envelope tightens, so the call is asked first.
    call, elicitation = approver.asked
    assert (call.kind, call.reasons) == ("call", ("side_effecting",))
    assert (elicitation.kind, elicitation.server, elicitation.tool) == (
        "elicitation",
        "billing",
        "refund",
    )
    assert (
        elicitation.message == "Refund 250 cents?"
        and elicitation.requested_schema["type"] == "object"
    )


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "strnig"}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}},
    ],
)
async def test_a_form_whose_schema_cannot_be_checked_is_declined_and_the_answer_kept(
    mode, revision, method, schema
):
    """A server's requested schema that JSON Schema cannot apply (an unknown type, a
    broken pattern, a reference to nowhere) declines the form: logged, and neither the
    person's answer nor the checker's error text reaches the server."""
    import json

    server = confirming("forms", "ask_form", mode)
    events: list[dict] = []
    approver = Approver(True, elicitation={"a": "PRIVATE-ANSWER"})
    async with Kit(kit_config(server), approve=approver, audit=events.append) as kit:
        result = await kit.call("forms", "ask_form", {"schema": json.dumps(schema)})
    assert text(result).startswith("decline"), text(result)
    assert "PRIVATE-ANSWER" not in str(result)
    (logged,) = [e for e in events if e["event"] == "elicitation"]
    assert logged["action"] == "decline" and "cannot be checked" in logged["why"]


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
@pytest.mark.parametrize("answer", [{"a": {"nested": "x"}}, {"a": [1, {"x": "y"}]}, {1: "x"}])
async def test_an_answer_a_form_cannot_carry_is_declined_and_the_call_completes(
    mode, revision, method, answer
):
    """A form carries text, numbers, booleans and lists of text: an approver's dict with
    a nested object, a list of other things or a key that is not text is declined (the
    server gets its answer, the call completes), where it was logged as accepted and the
    call failed ("unhandled errors in a TaskGroup" on 2026-07-28)."""
    import json

    server = confirming("forms", "ask_form", mode)
    schema = {"type": "object", "properties": {"a": {}}}  # any value: JSON Schema finds none wrong
    events: list[dict] = []
    approver = Approver(True, elicitation=answer)
    async with Kit(kit_config(server), approve=approver, audit=events.append) as kit:
        result = await kit.call("forms", "ask_form", {"schema": json.dumps(schema)})
    assert not result.is_error and text(result).startswith("decline"), text(result)
    (logged,) = [e for e in events if e["event"] == "elicitation"]
    assert logged["action"] == "decline" and "a form carries" in logged["why"]


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
async def test_an_answer_with_fields_the_form_did_not_ask_for_is_declined(mode, revision, method):
    """An approver's dict with a field the requested schema does not name (an open
    object: JSON Schema finds nothing wrong) was sent to the server whole; it is
    declined, as any answer the form cannot carry, and the extra value is not sent."""
    import json

    server = confirming("forms", "ask_form", mode)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    events: list[dict] = []
    approver = Approver(True, elicitation={"a": "x", "note": "PRIVATE-EXTRA"})
    async with Kit(kit_config(server), approve=approver, audit=events.append) as kit:
        result = await kit.call("forms", "ask_form", {"schema": json.dumps(schema)})
    assert not result.is_error and text(result).startswith("decline"), text(result)
    assert "PRIVATE-EXTRA" not in str(result)
    (logged,) = [e for e in events if e["event"] == "elicitation"]
    assert logged["action"] == "decline" and "note: not a field of this form" in logged["why"]


APPROVE_ON_TERMINAL = """
import sys
import anyio
from ticket_server.client import Kit, KitConfig, KitError, ServerConfig, ToolConfig, ask_on_terminal

server = ServerConfig(name="plain", transport="stdio", command=sys.argv[1:],
                      tools={"echo": ToolConfig(surface="human_controlled", side_effecting=False)})

async def main():
    async with Kit(KitConfig(servers={"plain": server}), approve=ask_on_terminal, audit=lambda e: None) as kit:
        try:
            result = await kit.call("plain", "echo", {"text": "approved"})
            print(result.content[0].text)
        except KitError as exc:
            print(exc)

anyio.run(main)
"""


@pytest.mark.parametrize(
    ("typed", "printed"), [("y\n", "approved"), ("\n", "plain.echo: a person refused the call")]
)
def test_the_terminal_approval_callback_asks_on_stderr_and_reads_stdin(tmp_path, typed, printed):
    import subprocess
    import sys

    script = tmp_path / "app.py"
    script.write_text(APPROVE_ON_TERMINAL, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), *kit_server("plain")],
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(printed)
    assert (
        'Allow plain.echo({"text": "approved"}) [human_controlled; irreversible]? [y/N] '
        in done.stderr
    )


async def test_the_terminal_approval_callback_shows_a_servers_url_without_its_control_characters(
    monkeypatch, capsys
):
    """A URL elicitation's URL is the server's text: an escape sequence or a line break in
    it is shown escaped, never sent to the terminal, where it could erase or rewrite the
    question the person answers."""
    import io
    import sys

    from ticket_server.client.kit import ask_on_terminal

    url = "https://pay.example.test/\x1b[2K\rAllow a harmless read?\nok"
    request = ApprovalRequest(
        kind="elicitation",
        server="billing",
        tool="refund",
        arguments={},
        envelope=None,
        reasons=("server asks",),
        trace_id="t",
        message="Pay here",
        mode="url",
        url=url,
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert await ask_on_terminal(request) is False
    shown = capsys.readouterr().err
    assert "\x1b" not in shown and "\r" not in shown and "\n" not in shown
    assert "pay.example.test" in shown


async def test_the_terminal_approval_callback_escapes_c1_controls_in_a_calls_arguments(
    monkeypatch, capsys
):
    """The arguments of a call to approve are shown as JSON, which escapes C0 controls
    (ESC) but, not kept to ASCII, left C1 ones (U+0080-U+009F) raw: U+009B is CSI, which
    a terminal honouring 8-bit controls takes as the start of an escape sequence. Both
    are shown escaped the same way."""
    import io
    import sys

    from ticket_server.client.kit import ask_on_terminal

    request = ApprovalRequest(
        kind="call",
        server="plain",
        tool="echo",
        arguments={"text": "a\x1b[2Kb\x9b2Kc\x85d\x7fé"},
        envelope=None,
        reasons=("human_controlled",),
        trace_id="t",
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert await ask_on_terminal(request) is False
    shown = capsys.readouterr().err
    assert not re.search("[\x00-\x1f\x7f-\x9f]", shown), repr(shown)
    assert '{"text": "a\\u001b[2Kb\\u009b2Kc\\u0085d\\u007fé"}' in shown


@pytest.mark.parametrize(("mode", "revision", "method"), REVISIONS)
async def test_our_server_over_http_through_the_kit(
    http_server, monkeypatch, mode, revision, method
):
    monkeypatch.setenv("KIT_TEST_TOKEN", http_server.token)
    server = ServerConfig(
        name="tickets",
        transport="http",
        url=http_server.url,
        auth={"bearer_env": "KIT_TEST_TOKEN"},
        mode=mode,
        envelope=LOCKED_READ,
        tools={"get_ticket_status_v2": ToolConfig()},
    )
    async with Kit(kit_config(server), audit=lambda e: None) as kit:
        result = await kit.call("tickets", "get_ticket_status_v2", {"ticket_id": "SUP-4412"})
        assert result.structured_content["id"] == "SUP-4412"
        assert (
            kit.sessions["tickets"].handshake.method,
            kit.sessions["tickets"].handshake.protocol_version,
        ) == (method, revision)
        with pytest.raises(InvalidArguments, match="ticket_id: Field required"):
            await kit.call("tickets", "get_ticket_status_v2", {})
