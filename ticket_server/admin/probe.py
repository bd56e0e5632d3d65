"""`ticket-server probe`: connect to any MCP server the way a robust client does and
say what it found.

The probe is a client, not a server: it connects through the client kit's
``ServerSession`` (the official ``mcp`` SDK ``Client`` in ``mode="auto"``:
``server/discover`` first, the legacy ``initialize`` handshake when the server does not
know it) and reports which of the two the connection used, as the kit records it from
the session, never inferred from the version string. Every step runs under a
deadline: a probe ends, it never hangs.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio
import httpx2 as httpx

# Where this server (and any server following its convention) puts machine-readable
# deprecation facts in a tool's `_meta` (MCP has no standard field for it).
DEPRECATION_META_KEY = "dev.ticket-server/deprecation"

Mode = Literal["auto", "legacy", "2026-07-28"]


class ProbeError(Exception):
    """The probe could not do its job; ``str()`` is one line saying why."""


@dataclass
class ToolInfo:
    name: str
    title: str | None
    summary: str
    deprecated: bool
    replacement: str | None = None
    sunset: str | None = None

    def status(self) -> str:
        if not self.deprecated:
            return "current"
        parts = ["DEPRECATED"]
        if self.replacement:
            parts.append(f"use {self.replacement}")
        if self.sunset:
            parts.append(f"retires {self.sunset}")
        return ", ".join(parts)


@dataclass
class CallInfo:
    tool: str
    arguments: dict[str, Any]
    is_error: bool
    structured_content: Any
    text: str


@dataclass
class ProbeReport:
    target: str
    transport: Literal["streamable-http", "stdio"]
    mode: str
    handshake: Literal["server/discover", "initialize", "none"]
    protocol_version: str
    server_name: str | None
    server_version: str | None
    instructions: str | None
    capabilities: dict[str, Any]
    tools: list[ToolInfo] = field(default_factory=list)
    call: CallInfo | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["server"] = {"name": data.pop("server_name"), "version": data.pop("server_version")}
        for tool in data["tools"]:
            tool["status"] = "deprecated" if tool["deprecated"] else "current"
        if data["call"] is None:
            del data["call"]
        return data

    def to_text(self) -> str:
        lines = [
            f"target            {self.target}",
            f"transport         {self.transport}",
            f"handshake         {self.handshake}"
            + ("" if self.mode == "auto" else f" (mode {self.mode})"),
            f"protocol version  {self.protocol_version}",
            f"server            {self.server_name or '(anonymous)'} {self.server_version or ''}".rstrip(),
            f"capabilities      {', '.join(describe_capabilities(self.capabilities)) or '(none)'}",
        ]
        if self.instructions:
            lines.append("instructions")
            lines.extend(f"  {line}" for line in self.instructions.splitlines())
        else:
            lines.append("instructions      (none)")
        lines.append(f"tools ({len(self.tools)})")
        width = max((len(t.name) for t in self.tools), default=0)
        lines.extend(f"  {t.name.ljust(width)}  {t.status()}" for t in self.tools)
        if self.call is not None:
            c = self.call
            lines.append(f"call {c.tool} {json.dumps(c.arguments, ensure_ascii=False)}")
            lines.append(f"  isError  {str(c.is_error).lower()}")
            if c.structured_content is not None:
                lines.append("  structuredContent")
                body = json.dumps(c.structured_content, indent=2, ensure_ascii=False)
                lines.extend(f"    {line}" for line in body.splitlines())
            else:
                lines.append("  text")
                lines.extend(f"    {line}" for line in c.text.splitlines())
        return "\n".join(lines)


def describe_capabilities(caps: Mapping[str, Any]) -> list[str]:
    """``{"tools": {"listChanged": true}, "logging": {}}`` -> ``["tools (listChanged)", "logging"]``."""
    out = []
    for name, value in caps.items():
        if value is None:
            continue
        flags = [k for k, v in value.items() if v is True] if isinstance(value, dict) else []
        out.append(f"{name} ({', '.join(flags)})" if flags else name)
    return out


def tool_info(tool: Any) -> ToolInfo:
    """A listed tool's name and deprecation status: the `_meta` facts when the server
    publishes them, else a description whose first line announces it."""
    meta = tool.meta or {}
    facts = meta.get(DEPRECATION_META_KEY)
    if not isinstance(facts, dict):
        facts = next(
            (v for k, v in meta.items() if k.endswith("/deprecation") and isinstance(v, dict)), None
        )
    description = (tool.description or "").strip()
    first_line = description.splitlines()[0] if description else ""
    deprecated = bool(facts and facts.get("deprecated")) or first_line.upper().startswith(
        "DEPRECATED"
    )
    return ToolInfo(
        name=tool.name,
        title=tool.title,
        summary=first_line,
        deprecated=deprecated,
        replacement=(facts or {}).get("replacement"),
        sunset=(facts or {}).get("sunset"),
    )


class _HttpWatch:
    """Remembers the last HTTP status so that a refusal can be named (401, 403, 404)."""

    def __init__(self) -> None:
        self.status: int | None = None

    async def on_response(self, response: httpx.Response) -> None:
        self.status = response.status_code


def _last_line(path_or_file: Any) -> str:
    try:
        path_or_file.seek(0)
        lines = [line.strip() for line in path_or_file.read().splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return lines[-1][:300] if lines else ""


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _flatten(sub)]
    return [exc]


def explain(
    exc: BaseException, *, what: str, timeout: float, http: _HttpWatch | None, stderr: Any
) -> str:
    """One line for the user: server gone, refused, timed out, unauthorised, or the error."""
    from mcp.shared.exceptions import MCPError

    from ticket_server.client import ServerUnavailable

    leaves = [
        leaf.__cause__ if isinstance(leaf, ServerUnavailable) and leaf.__cause__ else leaf
        for leaf in _flatten(exc)
    ]
    leaves = [inner for leaf in leaves for inner in _flatten(leaf)]
    if http is not None and http.status in (401, 403):
        word = "unauthorised" if http.status == 401 else "forbidden"
        return f"{what}: {word} (HTTP {http.status}); pass a valid bearer token with --token"
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            return f"{what}: timed out after {timeout:g} s (raise --timeout if the server is just slow)"
    for leaf in leaves:
        if isinstance(leaf, httpx.ConnectError):
            return f"{what}: connection refused ({leaf}); is the server running at that address?"
        if isinstance(leaf, httpx.TimeoutException):
            return f"{what}: timed out ({type(leaf).__name__})"
        if isinstance(leaf, FileNotFoundError):
            return f"{what}: cannot start the server: {leaf.strerror}: {leaf.filename}"
        if isinstance(leaf, PermissionError):
            return f"{what}: cannot start the server: {leaf.strerror}: {leaf.filename}"
    server_said = _last_line(stderr) if stderr is not None else ""
    for leaf in leaves:
        if isinstance(
            leaf,
            (
                anyio.ClosedResourceError,
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                EOFError,
                ServerUnavailable,
            ),
        ):
            return f"{what}: the server went away" + (
                f"; its last words: {server_said}" if server_said else ""
            )
        if isinstance(leaf, MCPError):
            if "Connection closed" in str(leaf):
                return f"{what}: the server went away" + (
                    f"; its last words: {server_said}" if server_said else ""
                )
            if http is not None and http.status == 404:
                return f"{what}: HTTP 404: no MCP endpoint at that URL (it usually ends in /mcp)"
            suffix = (
                f" (HTTP {http.status})"
                if http is not None and http.status and http.status >= 400
                else ""
            )
            return f"{what}: the server answered with an error: {leaf}{suffix}"
    leaf = leaves[0]
    text = str(leaf).replace("\n", " ").strip() or type(leaf).__name__
    return f"{what}: {text}"


async def probe(
    target: str | Sequence[str],
    *,
    token: str | None = None,
    mode: Mode = "auto",
    timeout: float = 10.0,
    call: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> ProbeReport:
    """Connect to ``target`` (an ``http(s)://`` URL, or a command to spawn over stdio),
    list its tools, optionally call one, and report. Each of the two steps (connect +
    list; the call) must finish within ``timeout`` seconds, else ProbeError.

    Built on the client kit's ``ServerSession``: the same connection, deadlines and
    handshake record an application gets."""
    from ticket_server.client import Audit, ServerConfig, ServerSession
    from ticket_server.client.kit import list_all_tools

    http: _HttpWatch | None = None
    stderr: Any = None
    server: dict[str, Any]
    if isinstance(target, str):
        if not target.startswith(("http://", "https://")):
            raise ProbeError(
                f"not an http(s) URL: {target!r} (for a stdio server: probe -- COMMAND ARGS...)"
            )
        http = _HttpWatch()
        server = {"transport": "http", "url": target, "auth": {"bearer": token} if token else None}
        shown, transport = target, "streamable-http"
    else:
        command = list(target)
        if not command:
            raise ProbeError("no command to spawn (usage: probe -- COMMAND ARGS...)")
        if token:
            raise ProbeError(
                "--token is for HTTP; a stdio server gets its identity from its own settings"
            )
        stderr = tempfile.TemporaryFile(  # noqa: SIM115  (closed in the finally below)
            mode="w+", encoding="utf-8", errors="replace"
        )
        server = {
            "transport": "stdio",
            "command": command,
            "env": dict(env if env is not None else os.environ),
        }
        shown, transport = " ".join(command), "stdio"

    config = ServerConfig(
        name="probe",
        mode=mode,
        deadline_seconds=timeout,
        connect_seconds=timeout,
        pinned=False,
        **server,
    )
    session = ServerSession(
        config,
        audit=Audit(lambda event: None),
        errlog=stderr,
        on_http_response=http.on_response if http else None,
    )
    step = f"connecting to {shown}"
    try:
        async with session:
            tools = await session.run(list_all_tools, deadline_seconds=timeout, what="tools/list")
            report = _report(session, shown, transport, mode)
            report.tools.extend(tool_info(t) for t in tools)
            if call is not None:
                step = f"calling {call}"
                args = dict(arguments or {})
                result = await session.run(
                    lambda client: client.call_tool(call, args),
                    deadline_seconds=timeout,
                    what=f"calling {call}",
                )
                report.call = CallInfo(
                    tool=call,
                    arguments=args,
                    is_error=bool(result.is_error),
                    structured_content=result.structured_content,
                    text="".join(getattr(b, "text", "") for b in result.content),
                )
            step = f"closing the connection to {shown}"
    except Exception as exc:  # every failure becomes one line
        raise ProbeError(
            explain(exc, what=step, timeout=timeout, http=http, stderr=stderr)
        ) from exc
    finally:
        if stderr is not None:
            stderr.close()
    return report


def _report(session: Any, shown: str, transport: str, mode: str) -> ProbeReport:
    """What the handshake told: which one ran, the version, the server's self-description."""
    shake = session.handshake
    return ProbeReport(
        target=shown,
        transport=transport,  # type: ignore[arg-type]
        mode=mode,
        handshake=shake.method,
        protocol_version=shake.protocol_version,
        server_name=shake.server_name,
        server_version=shake.server_version,
        instructions=shake.instructions,
        capabilities=shake.capabilities,
    )


def run_probe(
    target: str | Sequence[str], *, json_output: bool = False, **kwargs: Any
) -> tuple[int, str]:
    """Run a probe to completion: (exit status, text for stdout). ProbeError propagates.

    Exit status 0: connected (and the call, if any, returned a result without isError);
    1: the call returned ``isError: true`` (the result is still printed)."""
    report = anyio.run(lambda: probe(target, **kwargs))
    out = (
        json.dumps(report.to_json(), indent=2, ensure_ascii=False)
        if json_output
        else report.to_text()
    )
    status = 1 if report.call is not None and report.call.is_error else 0
    return status, out


def command_arguments(
    targets: Sequence[str], call: str | None, args_json: str | None
) -> tuple[str | list[str], dict[str, Any] | None]:
    """The probe command's target (a URL, or a stdio command's argv) and its --call
    arguments; ``CommandError`` for an address without a scheme and for --args that are not
    a JSON object or come without --call."""
    import re

    from ticket_server.admin import CommandError

    target: str | list[str] = list(targets)
    if len(targets) == 1 and targets[0].startswith(("http://", "https://")):
        target = targets[0]
    elif len(targets) == 1 and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", targets[0]):
        # another scheme was run as a stdio command ("No such file or directory")
        raise CommandError(
            f"probe: {targets[0]!r}: the probe speaks http:// and https:// (in lower case: "
            "Streamable HTTP), or for a stdio server the command after `--`"
        )
    elif len(targets) == 1 and looks_like_an_address(targets[0]):
        raise CommandError(
            f"probe: {targets[0]!r} has no scheme; write http://{targets[0]} (or "
            "https://...), or for a stdio server the command after `--`"
        )
    if args_json is not None and call is None:
        raise CommandError("--args needs --call TOOL")
    if call is None:
        return target, None
    try:
        arguments = json.loads(args_json) if args_json is not None else {}
    except json.JSONDecodeError as exc:
        raise CommandError(f"--args is not JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise CommandError('--args must be a JSON object, e.g. \'{"ticket_id": "SUP-4412"}\'')
    return target, arguments


def looks_like_an_address(target: str) -> bool:
    """``HOST:PORT[/path]`` or ``HOST/mcp`` without a scheme (and no program of that name)."""
    import re
    import shutil

    if shutil.which(target) is not None:
        return False
    host = r"(\[[0-9a-fA-F:.]+\]|[\w.-]+)"
    return re.fullmatch(rf"{host}(:\d+(/\S*)?|/mcp\S*)", target) is not None
