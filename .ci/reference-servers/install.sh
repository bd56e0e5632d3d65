#!/usr/bin/env bash
# Install the pinned MCP reference servers (server-everything, server-memory,
# server-filesystem: written by others, driven by tests/client) from package.json +
# package-lock.json beside this file into $ROOT/.cache/reference-servers (gitignored).
# Reinstalls only when either file changed; quiet when up to date. tests/client runs it.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${REFERENCE_SERVERS_CACHE_DIR:-$ROOT/.cache/reference-servers}"

mkdir -p "$CACHE"
# One installer at a time (pytest-xdist workers each run this on first use).
exec 9>"$CACHE/.lock"
flock 9
want="$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -d' ' -f1)"
have=""
[ -f "$CACHE/.installed" ] && have="$(cat "$CACHE/.installed")"
if [ "$have" != "$want" ] || [ ! -d "$CACHE/node_modules/@modelcontextprotocol/server-everything" ]; then
  command -v npm >/dev/null 2>&1 || { echo "reference-servers: npm not found: it is needed once to install the pinned servers into $CACHE" >&2; exit 1; }
  rm -f "$CACHE/.installed"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
  rm -rf "$CACHE/node_modules"
  if ! (cd "$CACHE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$CACHE/npm-install.log" 2>&1; then
    tail -n 30 "$CACHE/npm-install.log" >&2
    echo "reference-servers: npm ci failed in $CACHE (log: $CACHE/npm-install.log)" >&2
    exit 1
  fi
  echo "$want" >"$CACHE/.installed"
fi
