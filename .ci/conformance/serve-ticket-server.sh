#!/usr/bin/env bash
# The real ticket-server for run.sh (CONFORMANCE_SERVER_CMD): a throw-away SQLite
# database, migrated and seeded with the sample, then Streamable HTTP on
# 127.0.0.1:$PORT/mcp. The database is removed when the server ends. If
# TICKET_SERVER_DATABASE_URL is already set, that database is used and kept.
# The server requires a bearer token over HTTP: use ticket-server.sh, which creates a
# caller in one database and hands its token to run.sh (CONFORMANCE_AUTH_TOKEN).
set -euo pipefail
: "${PORT:?run.sh exports PORT}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${TICKET_SERVER_BIN:-$ROOT/.venv/bin/ticket-server}"
DB_DIR=""
if [ -z "${TICKET_SERVER_DATABASE_URL:-}" ]; then
  DB_DIR="$(mktemp -d "${TMPDIR:-/tmp}/ticket-server-conformance.XXXXXX")"
  export TICKET_SERVER_DATABASE_URL="sqlite+aiosqlite:///$DB_DIR/tickets.db"
  "$BIN" db upgrade
  "$BIN" db seed --if-empty
fi
trap '[ -z "$DB_DIR" ] || rm -rf "$DB_DIR"' EXIT
# Not exec'd, so that the EXIT trap can remove the database once the server is gone.
"$BIN" serve --transport http --host 127.0.0.1 --port "$PORT" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" || true; exit 143' TERM INT
wait "$pid"
