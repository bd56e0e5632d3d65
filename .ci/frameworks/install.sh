#!/usr/bin/env bash
# Install one agent framework of the client matrix (tests/frameworks/) into its own
# environment under $ROOT/.cache/frameworks/NAME (gitignored), from the pinned files in
# .ci/frameworks/NAME/: requirements.txt (a Python venv) or package.json +
# package-lock.json (npm). Reinstalls only when those files (or the Python version)
# changed: a stamp holds their hash. Prints the environment's directory.
#   usage: install.sh NAME|all [PYTHON]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
NAME="$1"
PYTHON="${2:-python3}"
if [ "$NAME" = all ]; then  # every pinned environment, one after another
  for pins in "$HERE"/*/; do bash "$0" "$(basename "$pins")" "$PYTHON" || exit 1; done
  exit 0
fi
PINS="$HERE/$NAME"
ENV="${FRAMEWORKS_CACHE_DIR:-$ROOT/.cache/frameworks}/$NAME"
[ -d "$PINS" ] || { echo "frameworks: no pinned environment $PINS" >&2; exit 2; }

if [ -f "$PINS/requirements.txt" ]; then
  want="$( (cat "$PINS/requirements.txt"; "$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -d' ' -f1)"
else
  want="$(cat "$PINS/package.json" "$PINS/package-lock.json" | sha256sum | cut -d' ' -f1)"
fi
have=""
[ -f "$ENV/.installed" ] && have="$(cat "$ENV/.installed")"
if [ "$have" != "$want" ]; then
  rm -rf "$ENV"
  mkdir -p "$ENV"
  log="$ENV/install.log"
  if [ -f "$PINS/requirements.txt" ]; then
    ok=true
    { "$PYTHON" -m venv "$ENV/venv" &&
      "$ENV/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        -r "$PINS/requirements.txt"; } >"$log" 2>&1 || ok=false
  else
    command -v npm >/dev/null 2>&1 || { echo "frameworks: npm is needed once to install $NAME into $ENV" >&2; exit 1; }
    cp "$PINS/package.json" "$PINS/package-lock.json" "$ENV/"
    ok=true
    (cd "$ENV" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$log" 2>&1 || ok=false
  fi
  if [ "$ok" != true ]; then
    tail -n 30 "$log" >&2
    echo "frameworks: installing $NAME failed (log: $log)" >&2
    exit 1
  fi
  echo "$want" >"$ENV/.installed"
fi
echo "$ENV"
