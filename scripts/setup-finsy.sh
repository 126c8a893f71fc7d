#!/usr/bin/env bash
# Creates .venv-finsy: a venv of its own for finsy, the asyncio P4Runtime client library used by
# tests/interop/test_finsy.py. It lives apart from .venv because finsy 0.30.0 requires
# protobuf>=6.33.6,<7 (it ships its own generated p4runtime modules), while .venv has protobuf 7.
# Idempotent: does nothing when the venv already has the pinned finsy; a change of FINSY_VERSION
# below reinstalls it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-finsy
FINSY_VERSION=0.30.0
have() {
  "$VENV/bin/python" - "$FINSY_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import finsy  # noqa: F401  (the import itself is the check: grpcio/protobuf must load)
sys.exit(version("finsy") != sys.argv[1])
PY
}
if [ -x "$VENV/bin/python" ] && have; then
  exit 0
fi
# Debian's interpreter, not a pyenv one, so the venv is the same on every machine of ours.
[ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
# The venv ignores itself, so it never shows up in git whatever the top-level .gitignore says.
echo '*' > "$VENV/.gitignore"
"$VENV/bin/pip" install -q --disable-pip-version-check "finsy==$FINSY_VERSION"
have || { echo "setup-finsy: $VENV does not import finsy $FINSY_VERSION" >&2; exit 1; }
echo "$VENV ready (finsy $FINSY_VERSION)"
