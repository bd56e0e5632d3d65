"""langchain-mcp-adapters against ticket-server, no model: MultiServerMCPClient lists the
tools as LangChain tools, each converted as bind_tools(strict=True) does
(convert_to_openai_tool(strict=True)) and without strict; every call of the plan is a
tool call through the tool itself (a ToolMessage, status "error" for isError).

usage: run.py CONFIG_JSON  (see tests/frameworks/conftest.py); prints one JSON document."""

import asyncio
import json
import sys
from importlib.metadata import version

from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools


def connection_for(config: dict) -> dict:
    if config["transport"] == "stdio":
        return {
            "transport": "stdio",
            "command": config["command"],
            "args": config["args"],
            "env": config["env"],
        }
    return {
        "transport": "streamable_http",
        "url": config["url"],
        "headers": {"Authorization": f"Bearer {config['token']}"},
    }


async def main(config: dict) -> dict:
    out: dict = {
        "framework": "langchain",
        "tools": {},
        "calls": [],
        "versions": {p: version(p) for p in ("langchain-mcp-adapters", "langchain-core", "mcp")},
    }
    client = MultiServerMCPClient({"tickets": connection_for(config)})
    # One session for all calls (client.get_tools() alone opens one per call: a new
    # server process per call over stdio).
    async with client.session("tickets") as session:
        return await use(out, config, {tool.name: tool for tool in await load_mcp_tools(session)})


async def use(out: dict, config: dict, tools: dict) -> dict:
    for name, tool in tools.items():
        out["tools"][name] = {
            "schema": convert_to_openai_tool(tool)["function"]["parameters"],
            "strict_schema": convert_to_openai_tool(tool, strict=True)["function"]["parameters"],
        }
    for n, call in enumerate(config["plan"]):
        message = await tools[call["tool"]].ainvoke(
            {
                "type": "tool_call",
                "id": f"call_{n}",
                "name": call["tool"],
                "args": call["arguments"],
            }
        )
        content = (
            message.content if isinstance(message.content, str) else json.dumps(message.content)
        )
        out["calls"].append({"is_error": message.status == "error", "text": content})
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
