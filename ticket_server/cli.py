"""The `ticket-server` command: serve | db upgrade | db downgrade | db seed | db reindex | callers | audit.

Every message goes to stderr; under `serve` (stdio) stdout belongs to JSON-RPC.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import typing
from collections.abc import Sequence
from pathlib import Path

from ticket_server import __version__
from ticket_server.admin import CommandError, classification_cli
from ticket_server.logging import configure_logging
from ticket_server.settings import (
    Settings,
    SettingsInvalid,
    ToolsetName,
    load_settings,
    unknown_variables,
)

log = logging.getLogger("ticket_server")


def _fail(message: str) -> None:
    print(f"ticket-server: {message}", file=sys.stderr)


def _serve(settings: Settings, args: argparse.Namespace) -> None:
    http_only = [
        flag
        for flag, value in (
            ("--host", args.host),
            ("--port", args.port),
            ("--workers", args.workers),
        )
        if value is not None
    ]
    if args.transport == "stdio" and http_only:
        raise CommandError(
            f"serve: {' and '.join(http_only)} {'apply' if len(http_only) > 1 else 'applies'} only to HTTP; add --transport http "
            "(stdio, the default, listens on no address)"
        )
    if args.port is not None and not 0 <= args.port <= 65535:
        raise CommandError(f"serve: --port {args.port}: give a TCP port from 0 to 65535")
    workers = 1 if args.workers is None else args.workers
    if workers < 1:
        raise CommandError("serve: --workers must be 1 or more")
    from ticket_server.admin.preflight import (
        require_free_port,
        require_readable_synonyms,
        require_writable_storage,
    )

    require_writable_storage(settings)
    require_readable_synonyms(settings)
    if args.transport == "stdio":
        from ticket_server.transports.process import collector_paused

        with collector_paused():
            from ticket_server.server import build_runtime
            from ticket_server.transports.stdio import serve_stdio

            runtime = build_runtime(settings, metrics=False)
        serve_stdio(runtime, _fail)  # a failed check: _fail(message), exit status 2
        return

    from ticket_server.db import DatabaseSetupError, require_current_schema

    try:
        asyncio.run(require_current_schema(settings))
    except DatabaseSetupError as exc:
        raise CommandError(str(exc)) from exc

    from ticket_server.transports import http

    settings = settings.model_copy(
        update={
            "host": args.host or settings.host,
            "port": args.port if args.port is not None else settings.port,
        }
    )
    require_free_port(settings.host, settings.port)
    url = f"http://{settings.host}:{settings.port}{http.MCP_PATH}"
    if workers > 1:
        import uvicorn

        http.export_to_workers(settings)
        if settings.rate_limit_storage_url.startswith("memory://"):
            log.warning(
                "rate-limit counters are per worker with memory:// storage; "
                "set TICKET_SERVER_RATE_LIMIT_STORAGE_URL=redis://... to share them"
            )
        log.info(
            f"serving MCP over Streamable HTTP on {url} with {workers} workers",
            extra={"url": url, "version": __version__, "workers": workers},
        )
        uvicorn.run(
            "ticket_server.transports.http:create_app",
            factory=True,
            workers=workers,
            host=settings.host,
            port=settings.port,
            log_config=None,
            timeout_graceful_shutdown=10,
            **http.worker_options(settings),
        )
        return
    app = http.serving_app(settings)

    def serving(port: int) -> None:
        url = f"http://{settings.host}:{port}{http.MCP_PATH}"
        log.info(
            f"serving MCP over Streamable HTTP on {url}", extra={"url": url, "version": __version__}
        )

    http.serve(app, settings, serving)


def _queues(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin import queues

    if args.queues_command == "add":
        queues.add(settings, args.name, args.display_name, args.description, args.time_zone)
    elif args.queues_command == "list":
        queues.list_(settings, args.json)
    else:
        queues.set_active(settings, args.name, args.queues_command == "activate")


def _callers(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin import commands

    if args.callers_command == "add":
        commands.callers_add(
            settings,
            args.name,
            args.scope,
            args.queue,
            args.tool_limit,
            args.http_limit,
            args.write_queue,
            args.confirm,
            args.toolset,
            args.kind,
        )
    elif args.callers_command == "bootstrap":
        commands.callers_bootstrap(settings, args.name)
    elif args.callers_command == "list":
        commands.callers_list(settings, args.json)
    elif args.callers_command == "revoke":
        commands.callers_revoke(settings, args.name)
    elif args.callers_command == "rotate":
        commands.callers_rotate(settings, args.name)


def _audit(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin import commands

    if args.audit_command == "prune":
        commands.audit_prune(settings, args.older_than, args.yes)
        return
    commands.audit(
        settings, args.caller, args.tool, args.since, args.limit, args.json, ticket=args.ticket
    )


def _report(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin import commands

    if args.report_command == "sla":
        from ticket_server.admin import sla_commands

        sla_commands.report(settings, args.queue, args.since, args.json)
        return
    commands.report_deprecated(settings, args.since, args.json)


def _sla(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin import sla_commands

    if args.sla_command == "load":
        sla_commands.load(settings, args.file)
    elif args.sla_command == "recompute":
        sla_commands.recompute(settings)
    else:
        sla_commands.show(settings)


def _db(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server import db

    try:
        if args.db_command == "upgrade":
            db.upgrade(settings.database_url, args.revision)
            log.info("database upgraded", extra={"revision": args.revision})
        elif args.db_command == "downgrade":
            tables = (
                []
                if args.revision != "base" or args.yes
                else [
                    t
                    for t in asyncio.run(db.table_names(settings))
                    if t != "alembic_version" and "_fts_" not in t  # FTS5's own tables
                ]
            )
            if tables:
                raise CommandError(
                    f"db downgrade base drops every table and its rows ({', '.join(tables)}), "
                    "the callers and the audit trail included; add --yes to do it, or give a "
                    "revision to go back to (-1: one step)"
                )
            db.downgrade(settings.database_url, args.revision)
            log.info("database downgraded", extra={"revision": args.revision})
        elif args.db_command == "seed":
            from ticket_server.admin.seeding import seed

            try:
                added = asyncio.run(
                    seed(
                        settings,
                        count=args.count,
                        path=args.file,
                        if_empty=args.if_empty,
                        progress=sys.stderr.isatty(),
                    )
                )
            except KeyboardInterrupt:
                _fail(
                    "db seed: interrupted; nothing was written (seeding keeps every ticket or none)"
                )
                raise
            log.info(f"seeded {added} tickets", extra={"added": added})
        elif args.db_command == "reindex":
            from ticket_server.admin.seeding import reindex

            done, tickets, off = asyncio.run(reindex(settings))
            log.info(f"gave search text to {done} comments", extra={"comments": done})
            log.info(
                f"checked the search postings of {tickets} tickets", extra={"tickets": tickets}
            )
            log.info(
                f"counted the tickets again for the counts: {off} "
                f"{'group was' if off == 1 else 'groups were'} off",
                extra={"tally_groups_off": off},
            )
    except db.DatabaseSetupError as exc:
        raise CommandError(f"db {args.db_command}: {exc}") from exc


def _tools(settings: Settings, args: argparse.Namespace) -> None:
    from pathlib import Path

    from ticket_server.admin import contract

    contract.command(args.tools_command, Path(args.contract), settings.toolsets)


def _tools_export(settings: Settings, args: argparse.Namespace) -> None:
    import json

    from ticket_server.admin import export

    export.check_format(args.format)
    tools = asyncio.run(export.list_tools(settings, caller=args.caller))
    block = export.envelope(tools, args.format)
    print(json.dumps(block, indent=2, ensure_ascii=False))
    print(export.size_line(args.format, len(tools), block), file=sys.stderr)


def _probe(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin.probe import ProbeError, command_arguments, run_probe

    # The probe is a client: its stdout is the report; the SDK's own logs stay quiet.
    logging.getLogger().setLevel(logging.DEBUG if args.verbose else logging.CRITICAL)
    if not 0 < args.timeout < float("inf"):  # nan too
        raise CommandError(
            f"probe: --timeout {args.timeout:g}: give the seconds each step may take, "
            "more than 0 (default 10)"
        )
    target, arguments = command_arguments(args.target, args.call, args.args)
    try:
        status, out = run_probe(
            target,
            json_output=args.json,
            token=args.token,
            mode=args.mode,
            timeout=args.timeout,
            call=args.call,
            arguments=arguments,
        )
    except ProbeError as exc:
        print(f"ticket-server probe: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
    print(out)
    sys.stdout.flush()  # a reader gone away (`| head`) is seen by main, before any SystemExit
    if status:
        print(f"ticket-server probe: {args.call} returned isError: true", file=sys.stderr)
        raise SystemExit(status)


def _client_tools(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.client import command

    command.tools(settings, args)


class _Parser(argparse.ArgumentParser):
    """Usage mistakes as one line that points at --help, exit status 2, like every error."""

    _deepest: typing.ClassVar[str | None] = None
    """The prog of the last (sub)command parser that ran: arguments no parser took are
    reported by the top one, but belong to the command given."""

    def parse_known_args(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        _Parser._deepest = self.prog
        return super().parse_known_args(*args, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        prog = self.prog
        if message.startswith("unrecognized arguments") and _Parser._deepest:
            prog = _Parser._deepest
        self.exit(2, f"{self.prog}: {message}; see `{prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ticket-server", description="An MCP server in front of a support-ticket database."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="serve the MCP tools (stdio by default)",
        description="Serve the MCP tools over stdio (the default) or Streamable HTTP. "
        "--host, --port and --workers apply to HTTP only: without --transport http they are "
        "refused. Over HTTP a port already in use is refused before anything is served.",
    )
    serve.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    serve.add_argument(
        "--host", help="HTTP bind address (default: TICKET_SERVER_HOST or 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, help="HTTP port (default: TICKET_SERVER_PORT or 8000)")
    serve.add_argument(
        "--workers",
        type=int,
        help="HTTP worker processes (default 1); more than one serves legacy clients stateless",
    )
    serve.set_defaults(handler=_serve)

    dbp = commands.add_parser("db", help="database schema and sample data")
    db_commands = dbp.add_subparsers(dest="db_command", required=True)
    up = db_commands.add_parser("upgrade", help="migrate the schema to the latest revision")
    up.add_argument("revision", nargs="?", default="head")
    down = db_commands.add_parser(
        "downgrade",
        help="migrate the schema back to a revision",
        description="Migrate the schema back to REVISION (an Alembic revision id, or -1 for "
        "one step). `base` drops every table, callers and audit trail included: it needs --yes.",
    )
    down.add_argument(
        "revision", help="the revision to go back to: an id, -1, or base (with --yes)"
    )
    down.add_argument("--yes", action="store_true", help="confirm `base`: drop every table")
    seedp = db_commands.add_parser(
        "seed",
        help="load tickets: the committed sample by default",
        description="Load tickets in one transaction: all of them or, on any error or "
        "interrupt (Ctrl-C), none. Tickets whose ids exist already are refused.",
    )
    source = seedp.add_mutually_exclusive_group()
    source.add_argument(
        "--count", type=int, help="generate this many tickets instead of the sample"
    )
    source.add_argument(
        "--file",
        help="load this JSON Lines file instead of the sample: one ticket a line, a JSON object "
        "with id, subject, body, status, priority, owner (or null), queue, customer, "
        "created_at and updated_at (RFC 3339); README: Loading your own tickets",
    )
    seedp.add_argument("--if-empty", action="store_true", help="do nothing if tickets exist")
    db_commands.add_parser(
        "reindex",
        help="make what an older server wrote searchable",
        description="Analyze the comments stored without search text (written by a server "
        "older than revision 0007 while a newer one already served: a rolling upgrade), "
        "which a search of the conversation misses, and write the search postings missing "
        "for tickets inserted or changed by a server older than revision 0008, and count "
        "the tickets again for count_tickets' tallies (writes wait meanwhile). Safe to run again.",
    )
    dbp.set_defaults(handler=_db)

    callersp = commands.add_parser(
        "callers", help="who may call the tools (tokens, scopes, queues)"
    )
    callers_commands = callersp.add_subparsers(dest="callers_command", required=True)
    add = callers_commands.add_parser(
        "add", help="create a caller; prints its token once on stdout"
    )
    add.add_argument("name")
    add.add_argument(
        "--scope", action="append", required=True, help="a scope, e.g. tickets:read (repeatable)"
    )
    add.add_argument(
        "--queue", action="append", help="limit to this queue (repeatable; default: every queue)"
    )
    add.add_argument(
        "--write-queue",
        action="append",
        help="with tickets:write: write only in this queue, one of its --queue ones (repeatable)",
    )
    add.add_argument(
        "--confirm",
        action="append",
        help="with tickets:write: a write a person confirms, a tool or close_ticket (set_ticket_status "
        "covers closing too); repeatable; `none` alone: none; default TICKET_SERVER_CONFIRM_WRITES",
    )
    add.add_argument(
        "--toolset",
        action="append",
        help="a toolset this caller's model is offered, one of "
        f"{', '.join(typing.get_args(ToolsetName))} (repeatable; default: "
        "TICKET_SERVER_TOOLSETS; `ticket-server tools toolsets` lists their tools); scopes "
        "still decide what it may call",
    )
    add.add_argument(
        "--kind",
        type=lambda kind: kind.strip().lower(),  # in any case, as --confirm and --toolset
        choices=("person", "assistant"),
        default="person",
        help="who writes through it: a person's client, or an assistant (its notes and "
        "replies read back as author_type assistant); default: %(default)s",
    )
    add.add_argument("--tool-limit", help="this caller's limit per tool, e.g. 120/minute")
    add.add_argument("--http-limit", help="this caller's HTTP request limit, e.g. 1200/minute")
    boot = callers_commands.add_parser("bootstrap", help="create a first caller unless any exists")
    boot.add_argument("--name", default="admin")
    lst = callers_commands.add_parser("list", help="list callers (never their tokens)")
    lst.add_argument("--json", action="store_true", help="one JSON object per caller")
    for name, text in (
        ("revoke", "revoke a caller's token"),
        (
            "rotate",
            "replace a caller's token (a revoked caller is restored); prints the new one once",
        ),
    ):
        callers_commands.add_parser(name, help=text).add_argument("name")
    callersp.set_defaults(handler=_callers)

    queuesp = commands.add_parser("queues", help="the queues tickets belong to (never deleted)")
    queues_commands = queuesp.add_subparsers(dest="queues_command", required=True)
    qadd = queues_commands.add_parser("add", help="add an active queue")
    qadd.add_argument("name", help="its key: a-z, 0-9, '_' and '-' (folded to lower case)")
    qadd.add_argument("--display-name", help="what people read (default: from the name)")
    qadd.add_argument("--description", default="", help="what the queue is for")
    qadd.add_argument("--time-zone", default="UTC", help="IANA name (default: %(default)s)")
    qlist = queues_commands.add_parser("list", help="list the queues, inactive ones too")
    qlist.add_argument("--json", action="store_true", help="one JSON object per queue")
    for name, text in (
        ("deactivate", "stop new tickets and moves into a queue (its tickets stay)"),
        ("activate", "let a deactivated queue take tickets again"),
    ):
        queues_commands.add_parser(name, help=text).add_argument("name")
    queuesp.set_defaults(handler=_queues)

    auditp = commands.add_parser("audit", help="print the audit trail of tool calls")
    auditp.add_argument("--caller", help="only this caller")
    auditp.add_argument("--tool", help="only this tool")
    auditp.add_argument("--since", help="only since then: 24h, 30m, 7d, or an ISO time")
    auditp.add_argument("--limit", type=int, help="most recent rows to print (default: 1000)")
    auditp.add_argument("--json", action="store_true", help="one JSON object per row")
    auditp.add_argument(
        "--ticket", help="the story of one ticket (e.g. SUP-4412): changes, comments, calls"
    )
    auditp.set_defaults(handler=_audit)
    audit_commands = auditp.add_subparsers(dest="audit_command")
    prunep = audit_commands.add_parser("prune", help="delete old audit rows (the retention policy)")
    prunep.add_argument(
        "--older-than",
        help="rows older than this: 90d, 12h, or an ISO time "
        "(default: TICKET_SERVER_AUDIT_RETENTION_DAYS, 90 days); less than 1h needs --yes",
    )
    prunep.add_argument(
        "--yes", action="store_true", help="confirm an age under 1h (0d: every row)"
    )

    reportp = commands.add_parser("report", help="usage reports from the audit trail")
    report_commands = reportp.add_subparsers(dest="report_command", required=True)
    deprecated = report_commands.add_parser(
        "deprecated", help="who still calls which deprecated tool, how often, and when last"
    )
    deprecated.add_argument("--since", help="only calls since then: 24h, 30m, 7d, or an ISO time")
    deprecated.add_argument(
        "--json", action="store_true", help="one JSON object per caller and tool"
    )
    slareport = report_commands.add_parser(
        "sla", help="SLA met / breached per priority and the median first response"
    )
    slareport.add_argument("--queue", help="one queue (default: every queue)")
    slareport.add_argument(
        "--since", default="7d", help="tickets created since: 24h, 7d, or an ISO time (7d)"
    )
    slareport.add_argument("--json", action="store_true", help="one JSON document")
    reportp.set_defaults(handler=_report)

    slap = commands.add_parser("sla", help="SLA policies: targets and business hours per queue")
    sla_commands = slap.add_subparsers(dest="sla_command", required=True)
    slaload = sla_commands.add_parser(
        "load", help="replace the SLA policy by a TOML or JSON file (README: SLA policies)"
    )
    slaload.add_argument("file", type=Path)
    sla_commands.add_parser("show", help="print the stored SLA policy as JSON")
    sla_commands.add_parser(
        "recompute", help="derive every ticket's stored SLA due and breach times again"
    )
    slap.set_defaults(handler=_sla)

    toolsp = commands.add_parser("tools", help="the published tool contract")
    tools_commands = toolsp.add_subparsers(dest="tools_command", required=True)
    for name, text in (
        (
            "check",
            "compare the live tools with the published contract; exit 2 on a breaking change",
        ),
        ("snapshot", "rewrite the published contract from the live tools"),
        (
            "toolsets",
            "list the toolsets, their tools and model-facing tokens, and which "
            "TICKET_SERVER_TOOLSETS offers",
        ),
    ):
        sub = tools_commands.add_parser(name, help=text)
        sub.add_argument(
            "--contract", default="tool-contract.json", help="contract file (default: %(default)s)"
        )
    toolsp.set_defaults(handler=_tools)
    # The formats are checked by the command (admin.export): building the parser imports
    # no operator module, so `serve` never loads the client kit.
    export = tools_commands.add_parser(
        "export",
        help="print the tool definitions in a model provider's function-calling format",
        description="Print the tools a caller sees as the provider's `tools` request field "
        "(for mcp: the tools/list result) on stdout, and the size of that block on stderr "
        "(bytes as compact JSON, and a token estimate).",
    )
    export.add_argument(
        "--format",
        default="openai",
        help="envelope: openai, anthropic, gemini or mcp (default: %(default)s)",
    )
    export.add_argument("--caller", help="export only the tools this caller may call")
    export.set_defaults(handler=_tools_export)

    probe = commands.add_parser(
        "probe",
        help="connect to an MCP server as a client and print what it offers",
        description="Connect the way a robust client does (server/discover, then initialize "
        "if the server does not know it) and print the handshake used, protocol version, "
        "server name/version/instructions, capabilities and each tool with its deprecation "
        "status. Exit 0 on success, 1 when --call returned isError, 3 when the server "
        "cannot be reached, refuses, goes away or misses the deadline.",
        usage="ticket-server probe [options] http://HOST:PORT/mcp\n"
        "       ticket-server probe [options] -- COMMAND [ARGS...]",
    )
    probe.add_argument(
        "target",
        nargs="+",
        help="an http(s):// URL, or after `--` a command that serves MCP over stdio",
    )
    probe.add_argument("--token", help="bearer token for an HTTP server")
    probe.add_argument("--call", metavar="TOOL", help="then call this tool and print the result")
    probe.add_argument(
        "--args", metavar="JSON", help="arguments for --call, a JSON object (default: {})"
    )
    probe.add_argument("--json", action="store_true", help="print the report as one JSON document")
    probe.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="deadline for connecting + listing, and again for the call (default: %(default)s)",
    )
    probe.add_argument(
        "--mode",
        choices=["auto", "legacy", "2026-07-28"],
        default="auto",
        help="auto (default): server/discover, falling back to initialize; or force one revision",
    )
    probe.add_argument("--verbose", action="store_true", help="show the MCP SDK's logs on stderr")
    probe.set_defaults(handler=_probe)

    clientp = commands.add_parser(
        "client", help="the client kit: what a kit configuration shows a model"
    )
    client_commands = clientp.add_subparsers(dest="client_command", required=True)
    client_tools = client_commands.add_parser(
        "tools",
        help="print the visible tools' schema block size, token estimate and cost per request",
        description="Connect to each server of CONFIG, take the tools the model is shown (pinned "
        "and visible) and print, per provider, the schema block's bytes as compact JSON, its "
        "tokens (estimated as bytes / 4, about +-25 % for JSON) and, given --price, its cost per "
        "request. With --print, the block itself on stdout instead (the figures on stderr).",
    )
    client_tools.add_argument("config", help="the kit's TOML configuration file")
    client_tools.add_argument(
        "--provider", choices=["openai", "anthropic", "gemini", "all"], default="all"
    )
    client_tools.add_argument(
        "--price", type=float, metavar="USD", help="input price per million tokens"
    )
    client_tools.add_argument(
        "--print", action="store_true", help="print the block (one provider) as JSON"
    )
    client_tools.set_defaults(handler=_client_tools)
    classification_cli.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except SettingsInvalid as exc:
        for line in exc.lines:
            _fail(line)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    for line, _ in unknown_variables():  # the misspelt ones were refused above
        log.warning(line)
    try:
        args.handler(settings, args)
        sys.stdout.flush()  # here, so that a reader gone away is seen below
    except CommandError as exc:
        _fail(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()
    return 0


def _reader_gone() -> int:
    """stdout's reader stopped reading (``ticket-server audit | head``): end quietly as a
    command killed by SIGPIPE does (status 141), with stdout pointed at /dev/null so that
    the interpreter's last flush at exit finds nowhere to fail."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
