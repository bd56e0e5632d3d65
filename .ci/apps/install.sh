#!/usr/bin/env bash
# Install the pinned MCP Apps reference host bridge (@modelcontextprotocol/ext-apps's
# AppBridge and PostMessageTransport) from package.json + package-lock.json beside this
# file into $ROOT/.cache/apps (gitignored), and bundle it with the pinned esbuild into one
# browser script, $CACHE/app-bridge.js, that sets `window.McpAppsHost`. The browser test
# (tests/tools/test_apps_browser.py) embeds ticket-server's views with it, as hosts do.
# Reinstalls only when either file changed; quiet when up to date. Needs npm once.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${APPS_CACHE_DIR:-$ROOT/.cache/apps}"
ESBUILD="$CACHE/node_modules/@esbuild/linux-x64/bin/esbuild"
BUNDLE="$CACHE/app-bridge.js"

mkdir -p "$CACHE"
want="$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -d' ' -f1)"
have=""
[ -f "$CACHE/.installed" ] && have="$(cat "$CACHE/.installed")"
if [ "$have" != "$want" ] || [ ! -f "$BUNDLE" ]; then
  command -v npm >/dev/null 2>&1 || { echo "apps: npm not found: it is needed once to install the pinned MCP Apps host bridge into $CACHE" >&2; exit 1; }
  rm -f "$CACHE/.installed"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
  rm -rf "$CACHE/node_modules"
  if ! (cd "$CACHE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$CACHE/npm-install.log" 2>&1; then
    tail -n 30 "$CACHE/npm-install.log" >&2
    echo "apps: npm ci failed in $CACHE (log: $CACHE/npm-install.log)" >&2
    exit 1
  fi
  printf '%s\n' \
    'export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";' \
    >"$CACHE/entry.mjs"
  (cd "$CACHE" && "$ESBUILD" entry.mjs --bundle --format=iife --global-name=McpAppsHost \
    --platform=browser --log-level=error --outfile="$BUNDLE")
  echo "$want" >"$CACHE/.installed"
fi
