"""The kit's configuration file: servers, envelopes, the most restrictive default, and
annotations that never loosen an envelope."""

from __future__ import annotations

import json

import pytest

from ticket_server.client import MOST_RESTRICTIVE, ConfigError, Envelope, load_config, parse_config

CONFIG = """
permissions = ["tickets:read"]

[servers.tickets]
transport = "stdio"
command = ["ticket-server", "serve"]
envelope = { surface = "locked", side_effecting = false, reversible = true, idempotent = true }

[servers.tickets.tools.get_ticket_status_v2]
[servers.tickets.tools.search_tickets_v2]
visible = false
deadline_seconds = 5
[servers.tickets.tools.add_internal_note]
side_effecting = true
reversible = false
required_permission = "tickets:write"

[servers.docs]
transport = "http"
url = "http://127.0.0.1:1/mcp"
namespace = "kb"
pinned = false
"""


def test_a_listed_tool_inherits_its_servers_envelope_field_by_field():
    config = parse_config(CONFIG)
    assert config.permissions == {"tickets:read"}
    tickets = config.servers["tickets"]
    assert tickets.name == "tickets" and tickets.prefix == "tickets"
    assert config.envelope_for("tickets", "get_ticket_status_v2") == Envelope(
        surface="locked", side_effecting=False, reversible=True, idempotent=True
    )
    note = config.envelope_for("tickets", "add_internal_note")
    assert (note.surface, note.side_effecting, note.reversible, note.idempotent) == (
        "locked",
        True,
        False,
        True,
    )
    assert note.required_permission == "tickets:write" and note.needs_approval
    assert (
        tickets.deadline_for("search_tickets_v2") == 5
        and tickets.deadline_for("get_ticket_status_v2") == 30
    )
    assert tickets.is_pinned("search_tickets_v2") and not tickets.is_visible("search_tickets_v2")


def test_unknown_server_and_unknown_tool_get_the_most_restrictive_envelope():
    config = parse_config(CONFIG)
    assert (
        Envelope(surface="human_controlled", side_effecting=True, reversible=False)
        == MOST_RESTRICTIVE
    )
    assert config.envelope_for("nobody", "anything") == MOST_RESTRICTIVE
    assert config.envelope_for("tickets", "delete_everything") == MOST_RESTRICTIVE
    assert not config.servers["tickets"].is_pinned("delete_everything")
    # An unpinned server makes every advertised tool live, still under the strictest envelope.
    docs = config.servers["docs"]
    assert (
        docs.prefix == "kb"
        and docs.is_pinned("search")
        and docs.envelope_for("search") == MOST_RESTRICTIVE
    )


@pytest.mark.parametrize(
    "hints",
    [
        {"readOnlyHint": True},
        {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
    ],
)
def test_advertised_annotations_never_loosen_an_envelope(hints):
    config = parse_config(CONFIG)
    assert config.envelope_for("tickets", "add_internal_note", hints) == config.envelope_for(
        "tickets", "add_internal_note"
    )
    assert config.envelope_for("nobody", "x", hints) == MOST_RESTRICTIVE


def test_annotations_can_tighten_an_envelope():
    config = parse_config(CONFIG)
    tightened = config.envelope_for(
        "tickets", "get_ticket_status_v2", {"destructiveHint": True, "idempotentHint": False}
    )
    assert tightened.side_effecting and not tightened.reversible and not tightened.idempotent
    assert config.envelope_for(
        "tickets", "get_ticket_status_v2", {"readOnlyHint": False}
    ).side_effecting


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "[servers.a]\ntransport = 'stdio'\n",
            "servers.a: Value error, a stdio server needs `command`",
        ),
        ("[servers.a]\ntransport = 'http'\nurl = 'http://x'\nsurprise = 1\n", "servers.a.surprise"),
        ("[servers.a]\ntransport = 'pigeon'\n", "servers.a.transport"),
        ("[servers.a-b]\ntransport = 'http'\nurl = 'http://x'\n", "namespace 'a-b'"),
        (
            "[servers.a]\ntransport='http'\nurl='http://x'\n[servers.b]\ntransport='http'\nurl='http://y'\nnamespace='a'\n",
            "share namespace 'a'",
        ),
        ("[servers.a\n", "not valid TOML"),
    ],
)
def test_a_bad_file_is_refused_with_the_field_named(text, says):
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source="kit.toml")
    assert str(caught.value).startswith("kit.toml: ") and says in str(caught.value)


def test_load_config_reads_a_file(tmp_path):
    path = tmp_path / "kit.toml"
    path.write_text(CONFIG, encoding="utf-8")
    assert load_config(path).servers["docs"].url == "http://127.0.0.1:1/mcp"
    with pytest.raises(ConfigError, match="missing.toml"):
        load_config(tmp_path / "missing.toml")
    # A review's finding: a file that is not UTF-8 raised UnicodeDecodeError (a traceback
    # from `ticket-server client tools`), not the ConfigError load_config promises.
    (tmp_path / "latin.toml").write_bytes("# caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin.toml: not UTF-8 text"):
        load_config(tmp_path / "latin.toml")


def test_annotations_read_only_false_make_a_tool_side_effecting_even_when_not_destructive():
    configured = Envelope(surface="locked", side_effecting=False, reversible=True)
    hints = {"readOnlyHint": False, "destructiveHint": False}
    assert configured.tightened_by(hints).side_effecting is True
    assert configured.tightened_by({"readOnlyHint": True}).side_effecting is False


def mcp_servers_json(memory: str, tmp_path) -> str:
    return json.dumps(
        {
            "permissions": ["memory:read"],
            "mcpServers": {
                "memory": {
                    "command": memory,
                    "args": [],
                    "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
                    "alwaysAllow": ["read_graph"],
                    "envelope": {"surface": "locked", "side_effecting": False},
                    "tools": {"read_graph": {}, "create_entities": {}},
                },
                "docs": {
                    "type": "http",
                    "url": "http://127.0.0.1:9/mcp",
                    "headers": {"Authorization": "Bearer t0k"},
                },
                "old": {"command": "nothing", "disabled": True},
            },
        }
    )


def test_the_mcp_servers_json_of_desktop_clients_is_read(tmp_path):
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(mcp_servers_json("/usr/bin/memory", tmp_path), encoding="utf-8")
    config = load_config(path)
    assert list(config.servers) == ["memory", "docs"] and config.permissions == {"memory:read"}
    memory, docs = config.servers["memory"], config.servers["docs"]
    assert memory.transport == "stdio" and memory.command == ["/usr/bin/memory"]
    assert memory.env == {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    assert memory.is_pinned("read_graph") and not memory.is_pinned("delete_entities")
    assert docs.transport == "http" and docs.auth.token() == "t0k"
    assert not docs.is_pinned("anything"), "a desktop entry pins nothing by itself"

    for bad, said in (
        ('{"mcpServers": {"x": {"type": "sse", "url": "http://h/sse"}}}', "'sse' is not supported"),
        ('{"mcpServers": {"x": {"command": ["a"]}}}', "`command` must be a string"),
        ('{"mcpServers": {"x": {"url": "http://h", "headers": {"X-Key": "1"}}}}', "X-Key"),
        ('{"servers": 1}', "expected a JSON object with `mcpServers`"),
        ("{nope", "not valid JSON"),
    ):
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(ConfigError, match=said):
            load_config(path)


async def test_a_desktop_config_drives_server_memory_and_check_reports_up_front(
    reference_servers, tmp_path
):
    """server-memory (npm) from an `mcpServers` file; `Kit(check=True)` connects to every
    server on entry and names the one that fails before any model turn."""
    from ticket_server.client import Kit, KitError

    path = tmp_path / "mcp.json"
    text = mcp_servers_json(str(reference_servers / "mcp-server-memory"), tmp_path)
    path.write_text(text, encoding="utf-8")
    config = load_config(path)
    with pytest.raises(KitError, match=r"configuration check failed: .*docs: FAILED"):
        async with Kit(config, check=True, audit=lambda e: None):
            pass
    only_memory = config.model_copy(update={"servers": {"memory": config.servers["memory"]}})
    async with Kit(only_memory, check=True, audit=lambda e: None) as kit:
        report = await kit.check()
        assert report.ok and report.servers[0].server_name == "memory-server"
        assert report.servers[0].tools >= 9
        graph = await kit.call("memory", "read_graph")
        assert not graph.is_error
