#!/usr/bin/env bash
# Installs the services the test suite starts for itself (PostgreSQL, redis-server)
# from Debian's packages when they are missing. Needs root (as on CI); without root it
# only says what is missing: those tests then skip outside CI and fail in CI.
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql postgresql-contrib)
command -v psql >/dev/null || missing+=(postgresql-client)
command -v redis-server >/dev/null || missing+=(redis-server)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-services: missing ${missing[*]} (install them as root, e.g. apt-get install ${missing[*]})" >&2
  exit 0
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
