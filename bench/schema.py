"""Benchmark 4: the tool definitions a read-only caller sees (the built-in local caller,
scope tickets:read), as compact JSON (the way SDKs send it), in bytes and estimated
tokens (ceil(bytes / 4), as `ticket-server tools export` estimates), against the bare
server's one tool: the block a model request carries (`tools export --format openai`:
name, description, input schema; issue 13's budget) and the whole tools/list result
(output schemas and _meta included)."""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from pathlib import Path

from bench.common import log, sqlite_copy, sqlite_url


def _block(tools) -> bytes:  # list[mcp.types.Tool]
    payload = {
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def _list(server) -> list:
    from fastmcp import Client

    async with Client(server) as c:
        return list(await c.list_tools())


def run() -> dict[str, object]:
    from bench.bare_server import build_bare
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite_copy(10_000, Path(tmp) / "t.db")
        ours_tools = asyncio.run(_list(build_server(Settings(database_url=sqlite_url(db)))))
    bare_tools = asyncio.run(_list(build_bare()))
    from ticket_server.admin.export import envelope, measure

    ours, bare = _block(ours_tools), _block(bare_tools)
    model_bytes, model_tokens = measure(envelope(ours_tools, "openai"))
    bare_model_bytes, bare_model_tokens = measure(envelope(bare_tools, "openai"))
    per_tool = {t.name: math.ceil(len(_block([t])) / 4) for t in ours_tools}
    out = {
        "tools": [t.name for t in ours_tools],
        "bytes": len(ours),
        "tokens": math.ceil(len(ours) / 4),
        "bare_bytes": len(bare),
        "bare_tokens": math.ceil(len(bare) / 4),
        "tokens_per_tool": per_tool,
        "model_bytes": model_bytes,
        "model_tokens": model_tokens,
        "bare_model_bytes": bare_model_bytes,
        "bare_model_tokens": bare_model_tokens,
    }
    out["ratio"] = out["tokens"] / out["bare_tokens"]
    # Every published tool (a caller holding every scope), by toolset and together.
    from ticket_server.admin import contract

    published = asyncio.run(contract.snapshot(contract.contract_server()))
    out["every_tool_tokens"] = contract.model_block_tokens(published)
    out["toolset_tokens"] = {
        name: tokens for name, _, _, tokens in contract.toolset_blocks(published)
    }
    log(
        f"schema: every tool ~{out['every_tool_tokens']} tokens; by toolset "
        + ", ".join(f"{name} ~{tokens}" for name, tokens in out["toolset_tokens"].items())
    )
    log(
        f"schema: {len(ours_tools)} tools, model request block {model_bytes} bytes, ~{model_tokens} tokens "
        f"(bare ~{bare_model_tokens}); tools/list {out['bytes']} bytes, ~{out['tokens']} tokens "
        f"(bare: {out['bare_bytes']} bytes, ~{out['bare_tokens']} tokens)"
    )
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
