"""The one configuration object: read once from the environment (prefix ``TICKET_SERVER_``).

Everything the deployment decides lives here; nothing comes from a client's request.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from platformdirs import user_data_path
from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

APP_NAME = "ticket-server"
ENV_PREFIX = "TICKET_SERVER_"
DATABASE_URL_FORMS = (
    "sqlite+aiosqlite:///PATH (an SQLite file: three slashes before a relative PATH, four "
    "before an absolute one) or postgresql+asyncpg://USER:PASSWORD@HOST/DATABASE"
)
JSON_SETTINGS: dict[str, tuple[type, str]] = {  # settings read as JSON: the type, and what to write
    "allowed_hosts": (list, "a JSON list; write it like '[\"tickets.example.com\"]'"),
    "allowed_origins": (list, "a JSON list; write it like '[\"http://localhost:6274\"]'"),
    "retirement_dates": (
        dict,
        'a JSON object; write it like \'{"get_ticket_status": "2027-01-31"}\'',
    ),
}
WORD_LISTS = {  # list settings also written as words: an example of each form
    "confirm_writes": ("reply_to_customer,close_ticket", '["reply_to_customer", "close_ticket"]'),
    "toolsets": ("read,respond,triage", '["read", "respond", "triage"]'),
    "attachment_types": ("image/png,application/pdf", '["image/png", "application/pdf"]'),
}


def rate_limit_problem(value: str) -> str | None:
    """What is wrong with a rate limit as written (``60/minute``), or None. One limit of
    at least one call: the limiter applies only the first of ``a;b`` (``limits.parse``),
    and a limit of 0 refuses every call."""
    from limits import parse_many

    try:
        items = parse_many(value)
    except ValueError:
        return f"{value!r} is not a rate limit; write it like 60/minute or 1000/hour"
    if len(items) != 1:
        return f"{value!r}: give one limit, like 60/minute (only the first would apply)"
    if items[0].amount < 1:
        return f"{value!r}: allow at least 1 call (like 60/minute); 0 would refuse every one"
    return None


def _listed(value: Any, examples: tuple[str, str]) -> Any:
    """A list setting's value: a JSON list, or words separated by commas or spaces, each
    trimmed and in lower case. Every such list holds names (toolsets, writes) or media
    types, which compare in any case (RFC 2045 section 5.1)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text.startswith("["):
        return [word.lower() for word in re.split(r"[\s,]+", text) if word]
    try:
        items = json.loads(text)
    except ValueError:
        words, listed = examples
        raise ValueError(f"not a JSON list; write it like {words} or '{listed}'") from None
    return [v.strip().lower() if isinstance(v, str) else v for v in items]


DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def default_data_dir() -> Path:
    """The user's data directory for this app (e.g. ``~/.local/share/ticket-server`` on Linux)."""
    return user_data_path(APP_NAME, appauthor=False)


def default_database_url() -> str:
    """An SQLite file in the user's data directory (never the CWD or the package folder)."""
    return f"sqlite+aiosqlite:///{default_data_dir() / 'tickets.db'}"


WriteAction = Literal[
    "add_internal_note",
    "reply_to_customer",
    "set_ticket_status",
    "close_ticket",
    "assign_ticket",
    "escalate_ticket",
    "open_ticket",
    "update_ticket_tags",
    "set_ticket_fields",
    "link_tickets",
    "merge_tickets",
    "bulk_update_tickets",
]
"""What a confirmation policy may name: a write tool, or ``close_ticket`` (set_ticket_status to closed)."""

ToolsetName = Literal[
    "read", "respond", "triage", "intake", "classify", "backlog", "attachments", "related"
]
"""A group of tools a deployment may offer (``ticket_server.tools.toolsets``)."""


class Settings(BaseSettings):
    """Server settings. Each field is read from ``TICKET_SERVER_<FIELD>`` (case-insensitive)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    database_url: str = Field(
        default_factory=default_database_url,
        description="Any SQLAlchemy async URL; default: an SQLite file in the user's data dir.",
    )
    database_timeout: float = Field(
        default=5.0, gt=0, description="Seconds a query may wait for the database before failing."
    )
    sqlite_journal_mode: Literal["wal", "delete"] = Field(
        default="wal",
        description="SQLite only: 'wal' lets reads go on while a write commits; 'delete' (the "
        "rollback journal) is for a file on a network filesystem, where WAL does not work "
        "(https://sqlite.org/wal.html).",
    )
    tool_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a tools/call may run; past it the call is cancelled and answered "
        "with an isError saying so.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    host: str = Field(default="127.0.0.1", description="HTTP bind address.")
    port: int = Field(default=8000, ge=0, le=65535, description="HTTP port.")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Extra Host header values accepted over HTTP (DNS-rebinding protection).",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Extra browser Origins accepted over HTTP."
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="Reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are trusted "
        "over HTTP: comma-separated addresses or networks (10.0.0.0/8), or * for any; empty "
        "(the default): none, every limit and check uses the connection's own address.",
    )
    max_request_bytes: int = Field(
        default=256 * 1024,
        ge=1024,
        le=4 * 1024 * 1024,
        description="Largest HTTP request body accepted (bytes); a larger one is answered "
        "413 with a JSON-RPC error. At most 4 MiB, the MCP SDK's own limit.",
    )
    http_read_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a client may take to send a request's headers, and again its "
        "body; past it the connection is closed (headers) or answered 408 (body).",
    )
    session_idle_timeout: float = Field(
        default=600.0,
        gt=0,
        description="Seconds a legacy (initialize) HTTP session may stay idle before the "
        "server closes it; a client then initializes again.",
    )
    sessions_per_caller: int = Field(
        default=8,
        ge=1,
        description="Most legacy HTTP sessions one caller may hold open at once; another "
        "initialize is answered 429.",
    )
    stateless_http: bool = Field(
        default=False,
        description="Serve legacy (initialize) clients without server-side sessions, "
        "so any replica can answer any request.",
    )

    retirement_dates: Annotated[dict[str, date], NoDecode] = Field(
        default_factory=dict,
        description="Moves the retirement date of deprecated tools (JSON object, tool name "
        "to date); a tool not named keeps the date in ticket_server/tools/versions.py. On "
        "and after it the tool is unlisted and answers with a pointer to its replacement.",
    )
    cursor_secret: SecretStr | None = Field(
        default=None,
        description="The older name of TICKET_SERVER_SECRET, still read; when both are set "
        "they must be equal.",
    )
    secret: SecretStr | None = Field(
        default=None,
        description="The server's one secret: search and conversation cursors and a write's "
        "confirmation state are sealed under keys derived from it, one per use (see "
        "ticket_server/access/sealing.py). Unset: a random secret made once per installation "
        "and kept beside the data; set it to one value on every replica that shares a "
        "database.",
    )

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        scheme, found, rest = value.partition("://")
        if not found:
            raise ValueError(f"{value!r} is not a URL; use {DATABASE_URL_FORMS}")
        dialect = scheme.partition("+")[0]
        wanted = DRIVERS.get(dialect)
        if wanted is None:
            raise ValueError(f"the database {dialect!r} is not supported; use {DATABASE_URL_FORMS}")
        if scheme != wanted:
            raise ValueError(
                f"the URL must name the async driver: write {wanted}://{'...' if dialect != 'sqlite' else rest} "
                f"instead of {scheme}://..."
            )
        if dialect == "sqlite" and rest and not rest.startswith("/"):
            # sqlite://tmp/x.db reads `tmp` as a host name: the file would be x.db in the
            # folder the server starts in, which is never what was meant.
            raise ValueError(
                f"{value!r} has two slashes after sqlite+aiosqlite:; an SQLite URL has three "
                f"before a relative path (sqlite+aiosqlite:///{rest}, from the folder the "
                f"server starts in) and four before an absolute one (sqlite+aiosqlite:////{rest})"
            )
        return value

    @field_validator("rate_limit_storage_url")
    @classmethod
    def _storage_url(cls, value: str) -> str:
        """memory:// or Redis, the storages the limiter is built for; any other scheme
        ended `serve` in a `limits` traceback. Only the scheme is echoed (a URL may
        carry a password)."""
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme not in ("memory", "redis", "rediss", "redis+unix"):
            raise ValueError(
                f"scheme {scheme[:20]!r} is not a rate-limit storage; use memory:// (one "
                "process) or redis://HOST:PORT/DB (rediss://, redis+unix:// too)"
            )
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        from pydantic import AnyHttpUrl, ValidationError

        if value is None:
            return value
        try:
            AnyHttpUrl(value)
        except ValidationError:
            raise ValueError(
                f"{value[:100]!r} is not an http(s) URL; write it like https://tickets.example.com"
            ) from None
        return value

    @field_validator("tool_rate_limit", "write_rate_limit", "http_rate_limit")
    @classmethod
    def _rate_limit(cls, value: str) -> str:
        problem = rate_limit_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("toolsets", "attachment_types", mode="before")
    @classmethod
    def _words(cls, value: Any, info: ValidationInfo) -> Any:
        return _listed(value, WORD_LISTS[info.field_name])  # type: ignore[index]

    @field_validator("confirm_writes", mode="before")
    @classmethod
    def _actions(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = [a for a in _listed(value, WORD_LISTS["confirm_writes"]) if a != "none"]
        choices = get_args(WriteAction)
        for action in value if isinstance(value, list) else []:
            if action not in choices:
                raise ValueError(
                    f"{action!r} is not a write; use some of {', '.join(choices)} (comma-separated), "
                    "or none"
                )
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_any_case(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_format", "auth_mode", "rate_limit_failure", mode="before")
    @classmethod
    def _choice_any_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxies(cls, value: str) -> str:
        import ipaddress

        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        for entry in entries:
            if entry == "*":
                continue
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an address or a network; write it like "
                    "'10.0.0.5,192.168.0.0/16' (or * for any)"
                ) from None
        return ",".join(entries)

    @field_validator("allowed_hosts", "allowed_origins", "retirement_dates", mode="before")
    @classmethod
    def _json(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        kind, wanted = JSON_SETTINGS[info.field_name]  # type: ignore[index]
        try:
            value = json.loads(value)
        except ValueError:
            value = None
        if not isinstance(value, kind):
            raise ValueError(f"not {wanted}")
        return value

    @model_validator(mode="after")
    def _jwt_keys(self) -> Settings:
        if self.auth_mode == "jwt" and not (self.jwt_jwks_url or self.jwt_public_key):
            raise ValueError(
                f"{ENV_PREFIX}AUTH_MODE=jwt needs the identity provider's keys: set "
                f"{ENV_PREFIX}JWT_JWKS_URL (its JWKS URL) or {ENV_PREFIX}JWT_PUBLIC_KEY (a PEM public key)"
            )
        if self.auth_mode == "jwt" and not (self.jwt_audience or "").strip():
            raise ValueError(
                f"{ENV_PREFIX}AUTH_MODE=jwt needs {ENV_PREFIX}JWT_AUDIENCE: set it to this "
                "server's own identifier, the `aud` its tokens carry (e.g. its public URL "
                "https://tickets.example.com/mcp); without it a token issued for any other "
                "service would be accepted"
            )
        return self

    @model_validator(mode="after")
    def _s3_bucket(self) -> Settings:
        if self.attachment_store == "s3" and not (self.attachment_s3_bucket or "").strip():
            raise ValueError(
                f"{ENV_PREFIX}ATTACHMENT_STORE=s3 needs {ENV_PREFIX}ATTACHMENT_S3_BUCKET: set it "
                "to the bucket (it must exist), or use the database store"
            )
        return self

    @model_validator(mode="after")
    def _one_secret(self) -> Settings:
        if (
            self.secret is not None
            and self.cursor_secret is not None
            and self.secret.get_secret_value() != self.cursor_secret.get_secret_value()
        ):
            raise ValueError(
                f"{ENV_PREFIX}SECRET and {ENV_PREFIX}CURSOR_SECRET (its older name) are both "
                f"set and differ: keep {ENV_PREFIX}SECRET only"
            )
        return self

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
        default=2.0,
        ge=0,
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
    jwt_default_role: str | None = Field(
        default=None,
        description="jwt mode: a callers-table name whose scopes, queues and limits a token "
        "subject with no row of its own gets; unset (default): such a subject gets nothing.",
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
    toolsets: Annotated[list[ToolsetName], NoDecode] = Field(
        default=["read", "respond", "triage"],
        min_length=1,
        description="The toolsets offered to callers without toolsets of their own (callers "
        "add --toolset): read, respond (notes and replies), triage (status, "
        "owner, priority, queue), intake (open tickets), classify (tags, custom fields), "
        "backlog (counts), attachments (read files), related (similar tickets, links, merge, "
        "bulk changes), as a JSON list or separated by commas; `ticket-server tools "
        "toolsets` lists them. A tool outside a caller's "
        "toolsets is not listed and cannot "
        "be called; scopes still apply within them.",
    )
    bulk_max_tickets: int = Field(
        default=500,
        ge=1,
        le=2_000,
        description="Most tickets one bulk_update_tickets call may change (its plan_token "
        "grows with them: about 22 bytes a ticket).",
    )
    confirm_writes: Annotated[list[WriteAction], NoDecode] = Field(
        default=["reply_to_customer", "close_ticket", "merge_tickets"],
        description="Writes that need a person's confirmation before they happen: tool names, "
        "or `close_ticket` (set_ticket_status to closed; `set_ticket_status` confirms closing "
        "too), as a JSON list or separated by commas; `none` for no confirmation.",
    )
    free_tags: bool = Field(
        default=False,
        description="Let update_ticket_tags add a tag outside the vocabulary (it then joins "
        "it); off: only the tags of `ticket-server tags add`.",
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
    audit_queue_limit: int = Field(
        default=100_000,
        ge=1,
        description="Most audit rows held in memory while the database does not take them "
        "(retried with backoff); a row past it is lost, counted in "
        "ticket_server_audit_rows_dropped and logged at ERROR.",
    )
    audit_retention_days: int = Field(
        default=90,
        ge=1,
        description="Days of audit rows `ticket-server audit prune` keeps without --older-than.",
    )
    caller_concurrency: int = Field(
        default=8,
        ge=1,
        description="Most tools/call of one caller running at once in one server process; "
        "one more is answered with an isError asking to wait.",
    )
    caller_share: int = Field(
        default=2,
        ge=1,
        description="Most expensive tools/call (searches, full ticket and customer reads, "
        "writes) of one caller doing their work at once in one server process; the "
        "caller's others wait their turn within the call deadline, so one caller cannot "
        "take the event loop or the database from the others.",
    )
    refusals_per_second: float = Field(
        default=10,
        ge=0,
        description="HTTP: 4xx and rate-limit refusals answered a second per caller, or per "
        "address without a valid token, per process; more wait, at most 3-4 s. 0: at once.",
    )

    metrics_token: SecretStr | None = Field(
        default=None,
        description="GET /metrics requires `Authorization: Bearer <this>`; unset: /metrics "
        "answers loopback clients only.",
    )

    attachment_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=1,
        le=100 * 1024 * 1024,
        description="Largest attachment accepted (bytes, after base64 decoding); a larger one "
        "is refused and nothing is written. Over HTTP a request is also bounded by "
        "max_request_bytes.",
    )
    attachment_ticket_max_bytes: int = Field(
        default=50 * 1024 * 1024,
        ge=1,
        description="Most bytes of attachments one ticket may hold together.",
    )
    attachment_types: Annotated[list[str], NoDecode] = Field(
        default=[
            "image/png",
            "image/jpeg",
            "image/gif",
            "image/webp",
            "application/pdf",
            "text/plain",
            "text/csv",
            "application/json",
        ],
        min_length=1,
        description="Media types accepted as attachments (a JSON list or separated by commas), "
        "as detected from the "
        "bytes, never from the name; a log file is text/plain.",
    )
    search_synonyms: Path | None = Field(
        default=None,
        description="A TOML file of query synonyms for search (groups of words and phrases "
        "that mean the same, as in ticket_server/tickets/synonyms.toml, the list used when "
        "unset); read when the server starts.",
    )
    attachment_store: Literal["database", "s3"] = Field(
        default="database",
        description="Where attachment bytes live: 'database' (the ticket database, nothing "
        "else to run) or 's3' (an S3-compatible bucket, attachment_s3_bucket; credentials from "
        "boto3's usual chain, AWS_ACCESS_KEY_ID and the like; needs the s3 extra).",
    )
    attachment_s3_bucket: str | None = Field(
        default=None, description="s3 store: the bucket (must exist)."
    )
    attachment_s3_endpoint_url: str | None = Field(
        default=None,
        description="s3 store: the endpoint of an S3-compatible service; unset: AWS.",
    )
    attachment_s3_prefix: str = Field(
        default="attachments/", description="s3 store: the key prefix of each object."
    )

    @property
    def base_url(self) -> str:
        """The server's public base URL: ``public_url``, else ``http://HOST:PORT``."""
        return self.public_url or f"http://{self.host}:{self.port}"

    # Properties, not cached_property: ``model_copy`` copies the instance's __dict__, so a
    # cached value would outlive a copy's new ``database_url``.
    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
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


class SettingsInvalid(Exception):
    """Settings that cannot be used: ``lines`` holds one line per setting (its environment
    variable, what is wrong, what to write instead)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


def load_settings(environ: Mapping[str, str] | None = None, **values: Any) -> Settings:
    """``Settings`` from the environment (and ``values``); ``SettingsInvalid`` for a bad
    value, and for a ``TICKET_SERVER_*`` variable of ``environ`` (default: the process's)
    that is a setting's name misspelt (e.g. ``TICKET_SERVER_DATABSE_URL``): unnoticed, its
    setting would silently keep its default."""
    misspelt = [line for line, close in unknown_variables(environ) if close]
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        raise SettingsInvalid(misspelt + [_problem(error) for error in exc.errors()]) from None
    except SettingsError as exc:  # a value the environment source itself could not decode
        raise SettingsInvalid([*misspelt, str(exc)]) from None
    if misspelt:
        raise SettingsInvalid(misspelt)
    return settings


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[tuple[str, bool]]:
    """Each ``TICKET_SERVER_*`` variable of ``environ`` (default: the process's) that names
    no setting (the prefix in any case, as the settings read it): one line saying so, and
    whether it is close to a setting's name (then the line names that setting)."""
    import difflib

    environ = os.environ if environ is None else environ
    names = sorted(Settings.model_fields)
    found = []
    for variable in sorted(environ):
        if not variable.upper().startswith(ENV_PREFIX):
            continue
        name = variable[len(ENV_PREFIX) :].lower()
        if name in Settings.model_fields:
            continue
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.85)
        if close:
            found.append(
                (
                    f"{variable} is not a setting; did you mean {ENV_PREFIX}{close[0].upper()}? "
                    f"Rename the variable (README: Settings lists every {ENV_PREFIX}* variable)",
                    True,
                )
            )
        else:
            found.append(
                (
                    f"{variable} is not a setting and is ignored (README: Settings lists every "
                    f"{ENV_PREFIX}* variable)",
                    False,
                )
            )
    return found


def _problem(error: Any) -> str:
    if not error["loc"]:  # a rule across settings: its message names them
        return str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"]
    name = str(error["loc"][0])
    variable = f"{ENV_PREFIX}{name.upper()}"
    if error["type"] == "value_error":  # our validators: the message says what to write
        return f"{variable}: {error['ctx']['error']}"
    field = Settings.model_fields.get(name)
    shown = (
        "" if field is not None and "Secret" in repr(field.annotation) else f"={error['input']!r}"
    )
    hint = f" ({field.description})" if field is not None and field.description else ""
    return f"{variable}{shown}: {error['msg']}{hint}"
