"""pydantic-ai, the OpenAI Agents SDK and langchain-mcp-adapters, each in its own pinned
environment (.ci/frameworks/NAME), against the real server over stdio and over
Streamable HTTP with a bearer token: listing, schema conversion, calls, isError; over
HTTP, the README's snippet for the framework too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.frameworks.conftest import (
    PINS,
    call_plan,
    check_calls,
    check_schemas,
    install,
    listed_tools,
    run_framework,
    run_readme_snippet,
    server_config,
)

# A cold run installs the pinned environment first (about a minute each on CI).
pytestmark = [pytest.mark.sqlite_only, pytest.mark.timeout(900)]
TRANSPORTS = ["stdio", "http"]


async def _run(
    name: str, transport: str, request, db_path: Path, settings, tmp_path: Path, **extra
) -> None:  # type: ignore[no-untyped-def]
    env = install(name)
    tools = await listed_tools(settings)
    plan = call_plan(tools)
    config = {**server_config(transport, request, db_path), "plan": plan, **extra}
    python = env / "venv" / "bin" / "python"
    out = run_framework([str(python), str(PINS / name / "run.py")], config, tmp_path)
    check_schemas(out, tools)
    check_calls(out, plan)
    if transport == "http":  # the README's snippet for this framework works as printed
        printed = run_readme_snippet(name, python, request.getfixturevalue("http_server"), tmp_path)
        assert "SUP-" in printed, printed


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_pydantic_ai(
    transport: str, request, db_path: Path, settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """C22: pydantic-ai's MCPToolset; schemas through its OpenAI strict transformer."""
    await _run("pydantic-ai", transport, request, db_path, settings, tmp_path)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_openai_agents(
    transport: str, request, db_path: Path, settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """C22: the OpenAI Agents SDK; schemas converted with convert_schemas_to_strict on and
    off; calls through the strict tools over stdio, the non-strict ones over HTTP."""
    await _run(
        "openai-agents",
        transport,
        request,
        db_path,
        settings,
        tmp_path,
        strict=transport == "stdio",
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_langchain(transport: str, request, db_path: Path, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """C22: langchain-mcp-adapters; schemas through convert_to_openai_tool(strict=True), as
    bind_tools(strict=True) does."""
    await _run("langchain", transport, request, db_path, settings, tmp_path)
