"""The one configuration object: read once from the environment (prefix ``TICKET_SERVER_``).

Everything the deployment decides lives here; nothing comes from a client's request.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from datetime import date
from pathlib import Path
from typing import Literal

from platformdirs import user_data_path
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

APP_NAME = "ticket-server"

def default_data_dir() -> Path:
    """The user's data directory for this app (e.g. ``~/.local/share/ticket-server`` on Linux)."""
    return user_data_path(APP_NAME, appauthor=False)


def default_database_url() -> str:
    """An SQLite file in the user's data directory (never the CWD or the package folder)."""
    return f"sqlite+aiosqlite:///{default_data_dir() / 'tickets.db'}"


WriteAction = Literal[
    "add_internal_note", "reply_to_customer", "set_ticket_status", "close_ticket", "assign_ticket", "escalate_ticket",
]
"""What a confirmation policy may name: a write tool, or ``close_ticket`` (set_ticket_status to closed)."""

class Settings(BaseSettings):
    """Server settings. Each field is read from ``TICKET_SERVER_<FIELD>`` (case-insensitive)."""

    model_config = SettingsConfigDict(env_prefix="TICKET_SERVER_", extra="ignore")

    database_url: str = Field(
        default_factory=default_database_url,
        description="Any SQLAlchemy async URL; default: an SQLite file in the user's data dir.",
    )
    database_timeout: float = Field(
        default=5.0, gt=0, description="Seconds a query may wait for the database before failing."
    )
    search_rank_window: int = Field(
        default=1000, ge=10, le=100_000,
        description="search_tickets_v2 ranks matches by relevance in windows of this many, newest first.",
    )
    tool_timeout: float = Field(
        default=30.0, gt=0,
        description="Seconds a tools/call may run; past it the call is cancelled and answered "
        "with an isError saying so.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    host: str = Field(default="127.0.0.1", description="HTTP bind address.")
    port: int = Field(default=8000, ge=0, le=65535, description="HTTP port.")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Extra Host header values accepted over HTTP (DNS-rebinding protection).",
    )
    allowed_origins: list[str] = Field(
        default_factory=list, description="Extra browser Origins accepted over HTTP."
    )
    max_request_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, le=4 * 1024 * 1024,
        description="Largest HTTP request body accepted (bytes); a larger one is answered "
        "413 with a JSON-RPC error. At most 4 MiB, the MCP SDK's own limit.",
    )
    stateless_http: bool = Field(
        default=False,
        description="Serve legacy (initialize) clients without server-side sessions, "
        "so any replica can answer any request.",
    )

    retirement_dates: dict[str, date] = Field(
        default_factory=dict,
        description="Moves the retirement date of deprecated tools (JSON object, tool name "
        "to date); a tool not named keeps the date in ticket_server/tools/versions.py. On "
        "and after it the tool is unlisted and answers with a pointer to its replacement.",
    )
    cursor_secret: SecretStr | None = Field(
        default=None,
        description="Key that signs search cursors; default: derived from database_url, "
        "so replicas on one database accept each other's cursors.",
    )

    @property
    def cursor_key(self) -> bytes:
        secret = self.cursor_secret.get_secret_value() if self.cursor_secret else self.database_url
        return hashlib.sha256(b"ticket-server search cursor\0" + secret.encode()).digest()

    # --- access: callers, identity, rate limits, audit (ticket_server/access/) ---
    auth_mode: Literal["callers", "jwt"] = Field(
        default="callers",
        description="How HTTP callers are identified: `callers` (bearer tokens from the "
        "callers table) or `jwt` (JWTs from an identity provider).",
    )
    public_url: str | None = Field(
        default=None,
        description="The server's public base URL, for the protected-resource metadata "
        "(RFC 9728); default: http://HOST:PORT.",
    )
    token: SecretStr | None = Field(
        default=None, description="stdio: the caller's token (verified like a bearer token)."
    )
    stdio_caller: str | None = Field(
        default=None, description="stdio: the caller's name (must exist in the callers table)."
    )
    caller_cache_seconds: float = Field(
        default=2.0, ge=0,
        description="Seconds a resolved caller (by token or stdio name) is kept in memory: "
        "a revocation or rotation made by another process takes effect within this many "
        "seconds (one made by this process at once); 0 looks the caller up on every call.",
    )
    jwt_issuer: str | None = Field(default=None, description="jwt mode: the required `iss`.")
    jwt_audience: str | None = Field(default=None, description="jwt mode: the required `aud`.")
    jwt_jwks_url: str | None = Field(default=None, description="jwt mode: the issuer's JWKS URL.")
    jwt_public_key: str | None = Field(
        default=None, description="jwt mode: a PEM public key (instead of a JWKS URL)."
    )
    jwt_algorithm: str = Field(default="RS256", description="jwt mode: the signing algorithm.")
    jwt_caller_claim: str = Field(
        default="sub", description="jwt mode: the claim that names the caller."
    )
    rate_limit_storage_url: str = Field(
        default="memory://",
        description="Rate-limit counters: `memory://` (one process) or `redis://HOST:PORT/DB` "
        "(shared by several server processes).",
    )
    rate_limit_failure: Literal["open", "closed"] = Field(
        default="open",
        description="When the rate-limit storage (Redis) does not answer: `open` (calls "
        "proceed without tool limits; an ERROR log line says so) or `closed` (tools/call "
        "is refused with an isError asking to retry shortly).",
    )
    tool_rate_limit: str = Field(
        default="60/minute",
        description="Default limit per caller per tool on tools/call (moving window), "
        "e.g. `60/minute`; a caller's own limit overrides it.",
    )
    write_rate_limit: str = Field(
        default="20/minute",
        description="Limit per caller per write tool (tickets:write) on tools/call, lower "
        "than reads by default; it applies whatever a caller's own read limit is.",
    )
    read_only: bool = Field(
        default=False,
        description="Serve no write tool at all: they are not listed and cannot be called.",
    )
    confirm_writes: list[WriteAction] = Field(
        default=["reply_to_customer", "close_ticket"],
        description="Writes that need a person's confirmation before they happen: tool names, "
        "or `close_ticket` (set_ticket_status to closed).",
    )
    http_rate_limit: str = Field(
        default="600/minute",
        description="Default limit of HTTP requests per caller on the HTTP endpoint.",
    )
    audit_batch_size: int = Field(
        default=200, ge=1, description="Most audit rows written in one transaction."
    )
    audit_flush_seconds: float = Field(
        default=1.0, gt=0, description="Longest an audit row waits before it is written."
    )

    metrics_token: SecretStr | None = Field(
        default=None,
        description="GET /metrics requires `Authorization: Bearer <this>`; unset: /metrics "
        "answers loopback clients only.",
    )

    @property
    def base_url(self) -> str:
        """The server's public base URL: ``public_url``, else ``http://HOST:PORT``."""
        return self.public_url or f"http://{self.host}:{self.port}"

    @cached_property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @cached_property
    def sqlite_path(self) -> Path | None:
        """The SQLite file of ``database_url``; None for other engines or in-memory SQLite."""
        if not self.is_sqlite:
            return None
        from sqlalchemy.engine import make_url

        database = make_url(self.database_url).database
        if not database or database == ":memory:":
            return None
        return Path(database)

    @property
    def uses_default_database(self) -> bool:
        return self.database_url == default_database_url()
