"""Requests a server makes of the client, each through a policy with a safe default:
elicitation (form and URL modes) to the approver with the call's tool and arguments, its
answer checked against the requested schema; sampling and roots refused unless the
application says otherwise; every one logged. Against server-everything and
server-filesystem (npm, written by others) and our own server's write confirmation."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.client.conftest import REFERENCE_BIN, everything, ours_stdio, stdio
from tests.helpers import scalar
from tests.transports.conftest import add_caller
from ticket_server.client import KitConfig, ToolConfig
from ticket_server.client.kit import ApprovalRequest, CallRefused, Kit

LOCKED = {"surface": "locked", "side_effecting": False, "reversible": True}
TRIGGERS = {
    "trigger-elicitation-request": ToolConfig(),
    "trigger-url-elicitation": ToolConfig(),
    "trigger-sampling-request": ToolConfig(),
    "get-roots-list": ToolConfig(),
}


def text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


class Policy:
    """An approver answering ``elicitation`` (a value, or a callable of the request) and
    remembering every request."""

    def __init__(self, elicitation=True, *, call=True, wait: float = 0) -> None:
        self.elicitation, self.call, self.wait, self.asked = elicitation, call, wait, []

    async def __call__(self, request: ApprovalRequest):
        self.asked.append(request)
        if self.wait:
            await anyio.sleep(self.wait)
        if request.kind == "call":
            return self.call
        return self.elicitation(request) if callable(self.elicitation) else self.elicitation


def config(bin_dir: Path) -> KitConfig:
    server = everything(bin_dir, envelope={**LOCKED, "side_effecting": False}, tools=TRIGGERS)
    return KitConfig(servers={"everything": server})


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == kind]


async def test_a_form_elicitation_answer_is_checked_against_the_requested_schema(
    reference_servers: Path,
):
    """`True` no longer ticks every checkbox (server-everything's form has a required
    name and a terms checkbox); a dict without the required field, or out of bounds, is
    declined; a dict that fits is sent. The approver is told the tool and arguments."""
    events: list[dict] = []
    answers = iter([True, {"check": True}, {"name": "Ada", "integer": 500}, {"name": "Ada"}])
    policy = Policy(lambda request: next(answers))
    async with Kit(config(reference_servers), approve=policy, audit=events.append) as kit:
        said = [text(await kit.call("everything", "trigger-elicitation-request")) for _ in range(4)]
    assert ["declined" in s for s in said] == [True, True, True, False]
    assert '"name": "Ada"' in said[3] and '"check"' not in said[3]
    asked = [r for r in policy.asked if r.kind == "elicitation"]
    assert len(asked) == 4
    assert all(
        (r.tool, r.arguments, r.mode) == ("trigger-elicitation-request", {}, "form") for r in asked
    )
    logged = of(events, "elicitation")
    assert [e["action"] for e in logged] == ["decline", "decline", "decline", "accept"]
    assert "a yes cannot fill" in logged[0]["why"]
    assert "name: Field required" in logged[1]["why"]
    assert "integer: 500 is greater than the maximum of 100" in logged[2]["why"]


async def test_a_url_elicitation_shows_the_approver_the_url(reference_servers: Path):
    url = "https://example.com/authorize?state=1"
    events: list[dict] = []
    policy = Policy(True)
    async with Kit(config(reference_servers), approve=policy, audit=events.append) as kit:
        result = await kit.call("everything", "trigger-url-elicitation", {"url": url})
    (asked,) = [r for r in policy.asked if r.kind == "elicitation"]
    assert (asked.mode, asked.url, asked.tool) == ("url", url, "trigger-url-elicitation")
    assert "accept" in text(result).lower()
    (logged,) = of(events, "elicitation")
    assert logged["mode"] == "url" and logged["url"] == url and logged["action"] == "accept"

    # Refused by the person: declined, logged.
    events.clear()
    async with Kit(config(reference_servers), approve=Policy(False), audit=events.append) as kit:
        result = await kit.call("everything", "trigger-url-elicitation", {"url": url})
    assert "decline" in text(result).lower()
    assert [e["action"] for e in of(events, "elicitation")] == ["decline"]


async def test_sampling_and_roots_are_refused_by_default_and_go_to_their_policies(
    reference_servers: Path, tmp_path: Path
):
    events: list[dict] = []
    # The approver allows the calls (server-everything marks them not read-only); no
    # sampling or roots policy is given.
    async with Kit(config(reference_servers), approve=Policy(), audit=events.append) as kit:
        refused = await kit.call("everything", "trigger-sampling-request", {"prompt": "hi"})
        roots = await kit.call("everything", "get-roots-list")
    assert refused.is_error or "refused" in text(refused)
    (sampling,) = of(events, "sampling")
    assert sampling["outcome"] == "refused" and sampling["why"] == "no sampling policy"
    assert sampling["tool"] == "trigger-sampling-request"
    assert of(events, "roots")[0]["outcome"] == "refused" and "file:" not in text(roots)

    seen: list[ApprovalRequest] = []

    def sample(request: ApprovalRequest):
        seen.append(request)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled by the app"},
            "model": "app-model",
        }

    events.clear()
    async with Kit(
        config(reference_servers),
        approve=Policy(),
        sample=sample,
        roots=[tmp_path.as_uri()],
        audit=events.append,
    ) as kit:
        answered = await kit.call("everything", "trigger-sampling-request", {"prompt": "hi"})
        listed = await kit.call("everything", "get-roots-list")
    assert "sampled by the app" in text(answered)
    (request,) = seen
    assert request.kind == "sampling" and request.tool == "trigger-sampling-request"
    assert request.arguments == {"prompt": "hi"} and request.params["messages"]
    assert of(events, "sampling")[0]["outcome"] == "answered"
    assert tmp_path.as_uri() in text(listed)

    # server-filesystem asks for roots and uses them as its allowed directories.
    (tmp_path / "shown").mkdir()
    (tmp_path / "shown" / "a.txt").write_text("in a root")
    fs = stdio(
        "fs",
        [str(REFERENCE_BIN / "mcp-server-filesystem"), str(tmp_path / "unused")],
        envelope=LOCKED,
        tools={"list_allowed_directories": ToolConfig()},
    )
    (tmp_path / "unused").mkdir()
    async with Kit(
        KitConfig(servers={"fs": fs}),
        roots=[(tmp_path / "shown").as_uri()],
        audit=events.append,
    ) as kit:
        await kit.call("fs", "list_allowed_directories")
        await anyio.sleep(0.5)  # the server asks for roots after the handshake
        allowed = text(await kit.call("fs", "list_allowed_directories"))
    assert str(tmp_path / "shown") in allowed and "unused" not in allowed


async def test_a_roots_policy_that_answers_false_refuses_and_one_uri_is_one_root(
    reference_servers: Path, tmp_path: Path
):
    """A roots policy answering False refuses, as an approver's False does: logged, and
    no Python error text reaches the server. One URI given as a string is one root, not
    one root per character."""
    events: list[dict] = []
    async with Kit(
        config(reference_servers), approve=Policy(), roots=lambda r: False, audit=events.append
    ) as kit:
        refused = await kit.call("everything", "get-roots-list")
    assert of(events, "roots")[0]["outcome"] == "refused"
    assert "iterable" not in text(refused) and "file:" not in text(refused)

    events.clear()
    async with Kit(
        config(reference_servers), approve=Policy(), roots=tmp_path.as_uri(), audit=events.append
    ) as kit:
        listed = await kit.call("everything", "get-roots-list")
    assert of(events, "roots")[0]["roots"] == [tmp_path.as_uri()]
    assert tmp_path.as_uri() in text(listed)


async def test_an_approver_that_raises_refuses_and_its_text_reaches_no_one(
    reference_servers: Path,
):
    def broken(request: ApprovalRequest):
        if request.kind == "call" and request.tool != "echo":
            return True
        raise RuntimeError("database password hunter2 at /srv/secret")

    events: list[dict] = []
    server = everything(
        reference_servers,
        envelope=LOCKED,
        tools={
            "trigger-elicitation-request": ToolConfig(),
            "echo": ToolConfig(surface="human_controlled"),
        },
    )
    async with Kit(
        KitConfig(servers={"everything": server}), approve=broken, audit=events.append
    ) as kit:
        result = await kit.call("everything", "trigger-elicitation-request")
        try:
            await kit.call("everything", "echo", {"message": "x"})
        except CallRefused as exc:
            refused = str(exc)
    assert "declined" in text(result) and "hunter2" not in text(result)
    assert refused == "tool everything.echo: the approval callback failed, so the call was not made"
    assert [e["error"] for e in of(events, "policy_error")] == ["RuntimeError", "RuntimeError"]
    assert all("hunter2" not in str(e) for e in events)


async def test_concurrent_elicitations_name_their_candidate_calls(reference_servers: Path):
    """Two calls that both ask, at once, on a legacy connection (server-everything): MCP
    does not say which call an elicitation belongs to, so the approver gets both."""
    policy = Policy(False)
    async with Kit(config(reference_servers), approve=policy, audit=lambda e: None) as kit:
        await kit.tools("everything")
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(kit.call, "everything", "trigger-elicitation-request")
    asked = [r for r in policy.asked if r.kind == "elicitation"]
    assert len(asked) == 2
    for request in asked:
        named = request.tool or (request.candidates and request.candidates[0][0])
        assert named == "trigger-elicitation-request"
    assert any(len(r.candidates) == 2 for r in asked)


async def test_our_servers_write_confirmation_reaches_the_approver_with_the_call(db_path: Path):
    """Our reply_to_customer asks a person (elicitation on legacy, input_required on
    2026-07-28): the approver sees the tool and its arguments, and a dict that does not
    fit the confirmation form is declined, so nothing is written."""
    token = add_caller(
        db_path, "writer", scopes=("tickets:read", "tickets:write"), queues=["billing"]
    )
    # An open ticket: a closed one takes internal notes only, refused before anyone is asked.
    billing = scalar(
        db_path,
        "SELECT id FROM tickets WHERE queue = 'billing' AND status <> 'closed' ORDER BY pk LIMIT 1",
    )
    assert billing
    for mode in ("legacy", "auto"):
        server = ours_stdio(
            db_path,
            mode=mode,
            envelope={"surface": "locked", "side_effecting": True},
            tools={"reply_to_customer": ToolConfig()},
        )
        server.env["TICKET_SERVER_TOKEN"] = token
        events: list[dict] = []
        policy = Policy({"no_such_field": 1})
        arguments = {"ticket_id": billing, "reply": f"hello over {mode}"}
        async with Kit(
            KitConfig(servers={"tickets": server}), approve=policy, audit=events.append
        ) as kit:
            result = await kit.call("tickets", "reply_to_customer", arguments)
        assert [r.kind for r in policy.asked] == ["call", "elicitation"]
        asked = policy.asked[1]
        assert asked.tool == "reply_to_customer" and dict(asked.arguments) == arguments
        (logged,) = of(events, "elicitation")
        assert logged["action"] == "decline" and "does not fit" in logged["why"]
        assert "hello over" not in str(events)  # arguments audited as a digest
        assert result.is_error or "declin" in text(result).lower(), text(result)


async def test_server_everything_over_http_elicits_through_the_policy(everything_http: str):
    """Legacy Streamable HTTP (server-everything's own transport): a person who takes
    longer than the call's deadline to answer does not time the call out (the SSE
    stream stays quiet meanwhile), and a malformed call never reaches it."""
    from ticket_server.client import ServerConfig

    server = ServerConfig(
        name="everything",
        transport="http",
        url=everything_http,
        envelope=LOCKED,
        tools={"trigger-elicitation-request": ToolConfig(), "echo": ToolConfig()},
    )
    policy = Policy({"name": "Ada"}, wait=1.5)
    events: list[dict] = []
    async with Kit(
        KitConfig(servers={"everything": server}), approve=policy, audit=events.append
    ) as kit:
        assert kit.sessions["everything"].handshake is None
        result = await kit.call("everything", "trigger-elicitation-request", deadline_seconds=1)
        assert kit.sessions["everything"].handshake.method == "initialize"
        block = await kit.tool_block()
        answer = await block.dispatch(
            "openai",
            {
                "id": "c",
                "type": "function",
                "function": {"name": "everything__echo", "arguments": "[1,2]"},
            },
        )
    assert '"name": "Ada"' in text(result)
    assert answer["content"].startswith("Error: invalid arguments for everything.echo")
    (asked,) = [r for r in policy.asked if r.kind == "elicitation"]
    assert asked.tool == "trigger-elicitation-request"
    assert [e["tool"] for e in events if e["event"] == "attempt"] == ["trigger-elicitation-request"]
