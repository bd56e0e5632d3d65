#!/usr/bin/env bash
# The conformance step of `make test`: run.sh against the real ticket-server.
# One throw-away SQLite database (migrated, seeded with the sample) serves both legs.
# HTTP needs a bearer token: a caller `conformance` (tickets:read, limits far above
# anything the suite sends) is created in that database and its token handed to
# run.sh as CONFORMANCE_AUTH_TOKEN (the suite cannot send headers; run.sh's
# auth-proxy.mjs adds it). The database is removed afterwards.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${TICKET_SERVER_BIN:-$ROOT/.venv/bin/ticket-server}"
DB_DIR="$(mktemp -d "${TMPDIR:-/tmp}/ticket-server-conformance.XXXXXX")"
trap 'rm -rf "$DB_DIR"' EXIT
export TICKET_SERVER_DATABASE_URL="sqlite+aiosqlite:///$DB_DIR/tickets.db"
export TICKET_SERVER_LOG_LEVEL="${TICKET_SERVER_LOG_LEVEL:-WARNING}"
# The suite is one caller that opens a legacy session per scenario and closes none: the
# per-caller session quota (default 8) would refuse it after eight.
export TICKET_SERVER_SESSIONS_PER_CALLER="${TICKET_SERVER_SESSIONS_PER_CALLER:-1000}"
{
  "$BIN" db upgrade
  "$BIN" db seed --if-empty
} >"$DB_DIR/setup.log" 2>&1 || { cat "$DB_DIR/setup.log" >&2; exit 1; }
CONFORMANCE_AUTH_TOKEN="$("$BIN" callers add conformance --scope tickets:read \
  --tool-limit 100000/minute --http-limit 100000/minute 2>>"$DB_DIR/setup.log")" ||
  { cat "$DB_DIR/setup.log" >&2; exit 1; }
export CONFORMANCE_AUTH_TOKEN
export CONFORMANCE_SERVER_CMD='bash .ci/conformance/serve-ticket-server.sh'
bash "$ROOT/.ci/conformance/run.sh" "$@"
