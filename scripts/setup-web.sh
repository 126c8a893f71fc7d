#!/usr/bin/env bash
# Node side of the web labs (web/): node-spdy and playwright-core from web/package-lock.json, and
# uPlot, the plots of the `p4netem web` dashboard.
# Idempotent: `npm ci` runs only when node_modules is missing or older than the lockfile.
# Also makes sure the venv has the Python libraries p4netem_studies.web uses (h2, cryptography) when the
# venv exists. Chromium itself is Debian's (scripts/setup-system.sh); playwright-core downloads
# no browser.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm
fi

stamp=web/node_modules/.p4netem-lock
if [ ! -f "$stamp" ] || ! cmp -s web/package-lock.json "$stamp"; then
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
  cp web/package-lock.json "$stamp"
fi

# The dashboard of `p4netem web` serves its JS libraries itself (never from a CDN): copied from
# node_modules into the package's static folder (git-ignored), which the editable install serves.
vendor=control-plane/p4netem/webapp/static/vendor
mkdir -p "$vendor"
cp web/node_modules/uplot/dist/uPlot.iife.min.js web/node_modules/uplot/dist/uPlot.min.css "$vendor/"

if [ -x .venv/bin/python ]; then
  .venv/bin/python - <<'PY' || .venv/bin/python -m pip install -q --disable-pip-version-check "h2>=4.1" "cryptography>=38"
import h2, cryptography  # noqa: F401
PY
fi
echo "web: node $(node --version), spdy $(node -p "require('./web/node_modules/spdy/package.json').version"), playwright-core $(node -p "require('./web/node_modules/playwright-core/package.json').version")"
