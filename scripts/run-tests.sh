#!/usr/bin/env bash
# `make test` after the build: the Rust unit tests, then every pytest suite under tests/ (unit,
# contract, dataplane wire tests, ...). Both always run; a summary of both comes last, and the exit
# status is non-zero if either failed. Full logs: build/test-logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:/root/.cargo/bin:$PATH"
logs=build/test-logs
mkdir -p "$logs"

echo "==> cargo test --release (dataplane)"
(cd dataplane && cargo test --release 2>&1) | tee "$logs/cargo.log"
rust_rc=${PIPESTATUS[0]}

echo "==> pytest tests/"
# The project's own modules compiled to bytecode first (__pycache__, git-ignored; only what changed
# is compiled again). The tests start the command line, labs, probes and servers as new Python
# processes many hundreds of times; with PYTHONDONTWRITEBYTECODE set (as on the CI machine) and a
# fresh clone, each of them compiled every project module it imported from source, ~0.15 s per
# `p4netem` command. A module edited later is compiled from source again, as without this.
.venv/bin/python -m compileall -q control-plane studies tests examples
# The 20 slowest tests are listed at the end: make test must stay under about 30 minutes. Every
# test's setup, call and teardown time is in pytest.xml (JUnit), for finding where the time goes.
.venv/bin/python -m pytest tests -rfEs --durations=20 --junitxml="$logs/pytest.xml" \
    -o junit_duration_report=total "$@" 2>&1 | tee "$logs/pytest.log"
py_rc=${PIPESTATUS[0]}

# Sum the per-binary "test result:" lines of cargo.
rust_summary=$(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) {
      if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i
    } } END { printf "%d passed, %d failed, %d ignored", p, f, g }' "$logs/cargo.log")
py_summary=$(grep -E "^=+ .*(passed|failed|error|no tests ran).* =+$" "$logs/pytest.log" | tail -1 | tr -d '=' | sed 's/^ *//')

status() { [ "$1" -eq 0 ] && echo "OK  " || echo "FAIL"; }
echo
echo "================ p4netem test summary ================"
printf "%s  rust   (cargo test): %s\n" "$(status $rust_rc)" "$rust_summary"
printf "%s  python (pytest)    : %s\n" "$(status $py_rc)" "${py_summary:-see $logs/pytest.log}"
echo "logs: $logs/cargo.log, $logs/pytest.log, $logs/pytest.xml"
echo "======================================================"
[ "$rust_rc" -eq 0 ] && [ "$py_rc" -eq 0 ]
