"""``ticket-server client tools CONFIG``: connect to every server of a kit configuration
and print, per model provider, the size of the visible tools' schema block, its token
estimate and its cost per request (the block is sent with every model request)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def tools(settings: Any, args: argparse.Namespace) -> None:
    """The ``client tools`` command (its arguments are defined in ``ticket_server.cli``)."""
    import anyio

    from ticket_server.client import ConfigError, Kit, KitError, load_config
    from ticket_server.client.adapters import ESTIMATE_METHOD, PRICED
    from ticket_server.client.audit import json_lines

    if args.price is not None and not 0 <= args.price < float("inf"):  # nan too
        print(
            f"ticket-server client: --price {args.price:g}: give the input price in USD per "
            "million tokens, 0 or more (e.g. --price 3)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    providers = PRICED if args.provider == "all" else (args.provider,)
    if args.print and len(providers) != 1:
        providers = ("openai",)

    async def run() -> list[str]:
        lines = []
        # The kit's audit lines go to stderr only on --print, where stdout is the block.
        async with Kit(
            load_config(args.config), audit=json_lines() if args.print else (lambda e: None)
        ) as kit:
            block = await kit.tool_block()
            if block.missing:  # a figure without a server's tools would mislead: say so
                raise KitError("; ".join(block.missing.values()))
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
