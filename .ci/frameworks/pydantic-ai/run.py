"""pydantic-ai against ticket-server, no model: MCPToolset lists the tools, the schemas
are converted as pydantic-ai's OpenAI profile does in strict mode, and every call of the
plan goes through the toolset's own call path (isError -> ModelRetry, what a model reads).

usage: run.py CONFIG_JSON  (see tests/frameworks/conftest.py); prints one JSON document."""

import asyncio
import json
import sys
from importlib.metadata import version

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.test import TestModel
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
from pydantic_ai.usage import RunUsage


def toolset_for(config: dict) -> MCPToolset:
    # The default 5 s to initialize is tight for a server process on a busy CI machine.
    timeouts = {"init_timeout": 30, "read_timeout": 60}
    if config["transport"] == "stdio":
        from fastmcp.client.transports import StdioTransport

        transport = StdioTransport(
            command=config["command"], args=config["args"], env=config["env"]
        )
        return MCPToolset(transport, **timeouts)
    return MCPToolset(
        config["url"], headers={"Authorization": f"Bearer {config['token']}"}, **timeouts
    )


async def main(config: dict) -> dict:
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    out: dict = {
        "framework": "pydantic-ai",
        "versions": {p: version(p) for p in ("pydantic-ai-slim", "mcp", "fastmcp-slim")},
        "tools": {},
        "calls": [],
    }
    async with toolset_for(config) as toolset:
        tools = await toolset.get_tools(ctx)
        for name, tool in tools.items():
            schema = tool.tool_def.parameters_json_schema
            strict = OpenAIJsonSchemaTransformer(json.loads(json.dumps(schema)), strict=True).walk()
            out["tools"][name] = {"schema": schema, "strict_schema": strict}
        for call in config["plan"]:
            try:
                result = await toolset.call_tool(
                    call["tool"], call["arguments"], ctx, tools[call["tool"]]
                )
                out["calls"].append({"is_error": False, "text": json.dumps(result, default=str)})
            except ModelRetry as exc:
                out["calls"].append({"is_error": True, "text": str(exc)})
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
