"""``ticket-server client tools CONFIG``: connect to every server of a kit configuration
and print, per model provider, the size of the visible tools' schema block, its token
estimate and its cost per request (the block is sent with every model request)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(commands: Any) -> None:
    """Add the ``client`` command to the ``ticket-server`` parser's subcommands."""
    clientp = commands.add_parser("client", help="the client kit: what a kit configuration shows a model")
    client_commands = clientp.add_subparsers(dest="client_command", required=True)
    tools = client_commands.add_parser(
        "tools",
        help="print the visible tools' schema block size, token estimate and cost per request",
        description="Connect to each server of CONFIG, take the tools the model is shown (pinned "
        "and visible) and print, per provider, the schema block's bytes as compact JSON, its "
        "tokens (estimated as bytes / 4, about +-25 %% for JSON) and, given --price, its cost per "
        "request. With --print, the block itself on stdout instead (the figures on stderr).",
    )
    tools.add_argument("config", help="the kit's TOML configuration file")
    tools.add_argument("--provider", choices=["openai", "anthropic", "gemini", "all"], default="all")
    tools.add_argument("--price", type=float, metavar="USD", help="input price per million tokens")
    tools.add_argument("--print", action="store_true", help="print the block (one provider) as JSON")
    tools.set_defaults(handler=_tools)


def _tools(settings: Any, args: argparse.Namespace) -> None:
    import anyio

    from ticket_server.client import ConfigError, Kit, KitError, load_config
    from ticket_server.client.adapters import ESTIMATE_METHOD, PROVIDERS
    from ticket_server.client.audit import json_lines

    providers = PROVIDERS if args.provider == "all" else (args.provider,)
    if args.print and len(providers) != 1:
        providers = ("openai",)

    async def run() -> list[str]:
        lines = []
        # The kit's audit lines go to stderr only on --print, where stdout is the block.
        async with Kit(load_config(args.config), audit=json_lines() if args.print else (lambda e: None)) as kit:
            block = await kit.tool_block()
            for provider in providers:
                if args.print:
                    print(json.dumps(block.tools(provider), indent=2, ensure_ascii=False))
                lines.append(block.cost(provider, args.price).line())
        return lines

    try:
        lines = anyio.run(run)
    except (ConfigError, KitError) as exc:
        print(f"ticket-server client: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    out = sys.stderr if args.print else sys.stdout
    for line in lines:
        print(line, file=out)
    print(f"tokens estimated as {ESTIMATE_METHOD}", file=out)
