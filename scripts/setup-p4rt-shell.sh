#!/usr/bin/env bash
# Creates .venv-p4rt-shell: a venv of its own for p4runtime-shell, the third-party P4Runtime client
# used by tests/interop. It lives apart from .venv because p4runtime-shell pins protobuf<3.21 and
# p4runtime==1.4.1, which cannot share a venv with the project's newer protobuf/p4runtime.
# Idempotent: does nothing when the venv already imports p4runtime_sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-p4rt-shell
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import p4runtime_sh.shell" 2>/dev/null; then
  exit 0
fi
# Debian's interpreter, not a pyenv one, so the venv is the same on every machine of ours.
/usr/bin/python3 -m venv "$VENV"
# The venv ignores itself, so it never shows up in git whatever the top-level .gitignore says.
echo '*' > "$VENV/.gitignore"
"$VENV/bin/pip" install -q --disable-pip-version-check "p4runtime-shell==0.0.6"
"$VENV/bin/python" -c "import p4runtime_sh.shell"
echo "$VENV ready"
