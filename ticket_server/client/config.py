"""The kit's configuration: which MCP servers an application talks to and, per server
and per tool, the envelope that governs a call. The file is ours (the application's),
never the server's; a server's tool annotations are hints that can tighten an
envelope and never loosen one.

A TOML file (read with the standard library's ``tomllib``)::

    permissions = ["tickets:read"]        # what this application may do

    [servers.tickets]
    transport = "stdio"
    command = ["ticket-server", "serve"]
    env = { TICKET_SERVER_DATABASE_URL = "sqlite+aiosqlite:///tickets.db" }
    envelope = { surface = "locked", side_effecting = false, reversible = true, idempotent = true }

    [servers.tickets.tools.get_ticket_status_v2]   # listed = pinned
    [servers.tickets.tools.search_tickets_v2]
    visible = false                                 # reachable, not shown to the model

    [servers.docs]
    transport = "http"
    url = "https://docs.example.com/mcp"
    auth = { bearer_env = "DOCS_TOKEN" }

A tool inherits its server's envelope field by field. A server or tool missing from the
file gets ``MOST_RESTRICTIVE``: human-controlled, side-effecting, irreversible.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Surface = Literal["locked", "human_controlled"]


class ConfigError(Exception):
    """The configuration file cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Envelope(_Strict):
    """What a call to one tool may do, decided by the application.

    - ``surface``: ``locked`` runs without a person when nothing else asks for one;
      ``human_controlled`` always goes to the approval callback.
    - ``side_effecting``: the call changes something; it goes to the approval callback.
    - ``reversible``: the change can be undone (shown to the approver).
    - ``idempotent``: repeating the call changes nothing more; only then is a failed
      call retried, and always with one idempotency key for every attempt.
    - ``required_permission``: the call is refused unless the application holds it.
    """

    surface: Surface = "human_controlled"
    side_effecting: bool = True
    reversible: bool = False
    idempotent: bool = False
    required_permission: str | None = None

    @property
    def needs_approval(self) -> bool:
        return self.surface == "human_controlled" or self.side_effecting

    def tightened_by(self, annotations: Any) -> Envelope:
        """This envelope after a server's tool annotations (MCP ``ToolAnnotations`` or a
        dict with ``readOnlyHint``/``destructiveHint``/``idempotentHint``): a hint may
        only make it stricter. ``readOnlyHint: false`` makes it side-effecting (whatever
        ``destructiveHint`` says: a change that destroys nothing is still a change);
        ``readOnlyHint: true`` never clears ``side_effecting``."""
        if annotations is None:
            return self
        hints = (
            annotations if isinstance(annotations, dict) else annotations.model_dump(by_alias=True)
        )
        update: dict[str, Any] = {}
        if hints.get("readOnlyHint") is False:
            update["side_effecting"] = True
        if hints.get("destructiveHint") is True:
            update.update(side_effecting=True, reversible=False)
        if hints.get("idempotentHint") is False:
            update["idempotent"] = False
        return self.model_copy(update=update)


MOST_RESTRICTIVE = Envelope()


class PartialEnvelope(_Strict):
    """Envelope fields given in the file; the unset ones are inherited."""

    surface: Surface | None = None
    side_effecting: bool | None = None
    reversible: bool | None = None
    idempotent: bool | None = None
    required_permission: str | None = None

    def over(self, base: Envelope) -> Envelope:
        return base.model_copy(update=self.model_dump(exclude_unset=True))


# How a call's arguments appear in its audit record: not at all, as a digest (sha256 and
# size of their compact JSON: enough to match two calls, nothing to read), or in full.
AuditArguments = Literal["none", "digest", "full"]


class ToolConfig(PartialEnvelope):
    """One pinned tool: its envelope fields, whether the model is shown it, its
    deadline, and how its arguments are audited (default: the server's)."""

    visible: bool = True
    deadline_seconds: float | None = Field(default=None, gt=0)
    audit_arguments: AuditArguments | None = None


class AuthConfig(_Strict):
    """A bearer token for HTTP: inline (tests) or, better, from an environment variable."""

    bearer: str | None = None
    bearer_env: str | None = None

    def token(self) -> str | None:
        if self.bearer_env:
            value = os.environ.get(self.bearer_env)
            if not value:
                raise ConfigError(
                    f"auth.bearer_env: environment variable {self.bearer_env} is not set"
                )
            return value
        return self.bearer


# Provider tool names allow [A-Za-z0-9_-]{1,64}; the namespace, two underscores and the
# tool's name must fit, so a namespace is short and has no double underscore.
NAMESPACE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*$")


class ServerConfig(_Strict):
    """One MCP server. ``pinned``: only the tools listed under ``tools`` are live; any
    other tool the server advertises, now or later, stays inert."""

    name: str
    transport: Literal["stdio", "http"]
    command: list[str] | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    auth: AuthConfig | None = None
    namespace: str | None = Field(default=None, max_length=20)
    mode: Literal["auto", "legacy", "2026-07-28"] = "auto"
    deadline_seconds: float = Field(default=30.0, gt=0)
    connect_seconds: float = Field(default=30.0, gt=0)
    retries: int = Field(default=2, ge=0, le=10)
    retry_backoff_seconds: float = Field(default=0.2, ge=0, le=30)
    audit_arguments: AuditArguments = "digest"
    pinned: bool = True
    envelope: PartialEnvelope = PartialEnvelope()
    tools: dict[str, ToolConfig] = {}

    @model_validator(mode="after")
    def _check(self) -> ServerConfig:
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs `command` (a list: program and arguments)")
        if self.transport == "http" and not self.url:
            raise ValueError("an http server needs `url`")
        if not NAMESPACE.match(self.prefix):
            raise ValueError(
                f"namespace {self.prefix!r}: letters and digits, single underscores between them, "
                "starting with a letter (set `namespace` when the server's name is not one)"
            )
        return self

    @property
    def prefix(self) -> str:
        """The namespace that prefixes this server's tool names for a model provider."""
        return self.namespace or self.name

    def envelope_for(self, tool: str, annotations: Any = None) -> Envelope:
        """The envelope of ``tool``: its own fields over the server's over the most
        restrictive; a tool this file does not list gets ``MOST_RESTRICTIVE``."""
        configured = self.tools.get(tool)
        if configured is None:
            base = MOST_RESTRICTIVE
        else:
            base = configured.over(self.envelope.over(MOST_RESTRICTIVE))
        return base.tightened_by(annotations)

    def is_pinned(self, tool: str) -> bool:
        return not self.pinned or tool in self.tools

    def is_visible(self, tool: str) -> bool:
        configured = self.tools.get(tool)
        return self.is_pinned(tool) and (configured is None or configured.visible)

    def audit_arguments_for(self, tool: str) -> AuditArguments:
        configured = self.tools.get(tool)
        if configured is not None and configured.audit_arguments is not None:
            return configured.audit_arguments
        return self.audit_arguments

    def deadline_for(self, tool: str) -> float:
        configured = self.tools.get(tool)
        if configured is not None and configured.deadline_seconds is not None:
            return configured.deadline_seconds
        return self.deadline_seconds


def deadline_of(given: object, server: ServerConfig | None, tool: str) -> float:
    """A call's deadline: ``given``, or when it is None that of ``server``'s ``tool`` (30 s
    if the server is not configured; its call is refused). ``given`` must be a finite
    number above 0, as a configured one is: 0 fell back to the configuration and a
    negative one timed out before the first attempt. ``ValueError`` otherwise."""
    if given is None:
        return server.deadline_for(tool) if server else 30.0
    if isinstance(given, int | float) and not isinstance(given, bool):  # True is not 1 s
        seconds = float(given) if abs(given) < 1e300 else math.inf  # 10**400: no float
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    raise ValueError(
        f"deadline_seconds={given!r}: give a finite number of seconds above 0, "
        "or None for the configured deadline"
    )


class KitConfig(_Strict):
    """The whole file: the application's permissions and its servers, by name."""

    permissions: frozenset[str] = frozenset()
    servers: dict[str, ServerConfig] = {}

    @model_validator(mode="before")
    @classmethod
    def _name_servers(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("servers"), dict):
            servers = {
                name: {"name": name, **body} if isinstance(body, dict) else body
                for name, body in data["servers"].items()
            }
            data = {**data, "servers": servers}
        return data

    @model_validator(mode="after")
    def _unique_namespaces(self) -> KitConfig:
        seen: dict[str, str] = {}
        for name, server in self.servers.items():
            if server.prefix in seen:
                raise ValueError(
                    f"servers {seen[server.prefix]} and {name} share namespace {server.prefix!r}"
                )
            seen[server.prefix] = name
        return self

    def envelope_for(self, server: str, tool: str, annotations: Any = None) -> Envelope:
        """The envelope of ``server``'s ``tool``; an unknown server gets ``MOST_RESTRICTIVE``."""
        configured = self.servers.get(server)
        if configured is None:
            return MOST_RESTRICTIVE.tightened_by(annotations)
        return configured.envelope_for(tool, annotations)


def parse_config(text: str, *, source: str = "<config>") -> KitConfig:
    """A ``KitConfig`` from TOML text; ``ConfigError`` names ``source`` and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    return _validated(data, source)


# Keys of desktop clients' `mcpServers` entries that mean nothing to the kit (each
# client's own approval lists, UI text, timeouts): read past, never obeyed.
_DESKTOP_ONLY = frozenset(
    {"alwaysAllow", "autoApprove", "disabledTools", "description", "timeout", "icon", "envFile"}
)


def _from_mcp_servers(data: Any, source: str) -> dict[str, Any]:
    """The kit's configuration from the ``{"mcpServers": {...}}`` JSON that desktop
    clients (Claude Desktop, Cursor, VS Code's ``servers``) use: ``command`` + ``args``
    (+ ``env``, ``cwd``) is stdio; ``url`` (``type`` ``http``/``streamable-http``) is
    HTTP, with a bearer token from an ``Authorization`` header; ``disabled: true`` leaves
    a server out. Any kit field (``envelope``, ``tools``, ``namespace``, ...) may sit
    beside them; without ``tools`` a server's tools are all inert until pinned. The
    top level may carry ``permissions``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object with `mcpServers`")
    entries = data.get("mcpServers", data.get("servers"))
    if not isinstance(entries, dict):
        raise ConfigError(f"{source}: expected a JSON object with `mcpServers`")
    servers: dict[str, Any] = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: mcpServers.{name}: expected an object")
        if entry.get("disabled") is True:
            continue
        body = {k: v for k, v in entry.items() if k not in _DESKTOP_ONLY and k != "disabled"}
        kind = body.pop("type", None)
        if "command" in body or kind == "stdio":
            command = body.pop("command", None)
            args = body.pop("args", [])
            if not isinstance(command, str) or not isinstance(args, list):
                raise ConfigError(
                    f"{source}: mcpServers.{name}: `command` must be a string and `args` a list"
                )
            body.update(transport="stdio", command=[command, *map(str, args)])
        elif "url" in body:
            if kind not in (None, "http", "streamable-http", "streamableHttp"):
                raise ConfigError(
                    f"{source}: mcpServers.{name}: transport type {kind!r} is not supported "
                    "(stdio or Streamable HTTP)"
                )
            headers = body.pop("headers", None) or {}
            auth = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
            if auth is not None:
                scheme, _, token = str(auth).partition(" ")
                if scheme.lower() != "bearer" or not token:
                    raise ConfigError(
                        f"{source}: mcpServers.{name}: only a Bearer Authorization header is supported"
                    )
                body.setdefault("auth", {"bearer": token.strip()})
            others = sorted(k for k in headers if k.lower() != "authorization")
            if others:
                raise ConfigError(
                    f"{source}: mcpServers.{name}: headers other than Authorization are not supported: "
                    + ", ".join(others)
                )
            body["transport"] = "http"
        servers[name] = body
    top = {k: v for k, v in data.items() if k not in ("mcpServers", "servers")}
    return {**top, "servers": servers}


def _validated(data: Any, source: str) -> KitConfig:
    try:
        return KitConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{source}: {problems}") from exc


def parse_mcp_servers(text: str, *, source: str = "<config>") -> KitConfig:
    """A ``KitConfig`` from desktop clients' ``mcpServers`` JSON text."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc}") from exc
    return _validated(_from_mcp_servers(data, source), source)


def load_config(path: str | Path) -> KitConfig:
    """Read and check the file at ``path``: the kit's TOML, or (a ``.json`` file) the
    ``mcpServers`` JSON of desktop clients. ``ConfigError`` when it cannot be used."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if path.suffix.lower() == ".json":
        return parse_mcp_servers(text, source=str(path))
    return parse_config(text, source=str(path))
