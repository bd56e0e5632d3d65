"""The OpenAI Agents SDK against ticket-server, no model: an Agent with the MCP server
lists its function tools with convert_schemas_to_strict on and off; every call of the
plan goes through FunctionTool.on_invoke_tool (what the Runner does for a model's call),
the strict tools when strict is on.

usage: run.py CONFIG_JSON  (see tests/frameworks/conftest.py); prints one JSON document."""

import asyncio
import json
import sys
from importlib.metadata import version

from agents import Agent, RunContextWrapper
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from agents.tool_context import ToolContext


def server_for(config: dict):
    if config["transport"] == "stdio":
        params = {"command": config["command"], "args": config["args"], "env": config["env"]}
        return MCPServerStdio(params=params, client_session_timeout_seconds=30)
    params = {
        "url": config["url"],
        "headers": {"Authorization": f"Bearer {config['token']}"},
        "timeout": 30,
    }
    return MCPServerStreamableHttp(params=params, client_session_timeout_seconds=30)


async def main(config: dict) -> dict:
    strict = bool(config.get("strict", True))
    out: dict = {
        "framework": "openai-agents",
        "versions": {p: version(p) for p in ("openai-agents", "mcp")},
        "tools": {},
        "calls": [],
    }
    async with server_for(config) as server:
        context = RunContextWrapper(context=None)
        tools = {}
        for convert in (False, True):
            agent = Agent(
                name="tickets",
                mcp_servers=[server],
                mcp_config={"convert_schemas_to_strict": convert},
            )
            for tool in await agent.get_all_tools(context):
                entry = out["tools"].setdefault(tool.name, {})
                entry["strict_schema" if convert else "schema"] = tool.params_json_schema
                entry["strict_json_schema" if convert else "strict_off_json_schema"] = (
                    tool.strict_json_schema
                )
                if convert == strict:
                    tools[tool.name] = tool
        for n, call in enumerate(config["plan"]):
            arguments = json.dumps(call["arguments"])
            ctx = ToolContext(
                context=None,
                tool_name=call["tool"],
                tool_call_id=f"call_{n}",
                tool_arguments=arguments,
            )
            text = await tools[call["tool"]].on_invoke_tool(ctx, arguments)
            raw = await server.call_tool(call["tool"], call["arguments"])
            is_error = raw.is_error if hasattr(raw, "is_error") else raw.isError  # mcp 2.x / 1.x
            out["calls"].append({"is_error": bool(is_error), "text": str(text)})
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
