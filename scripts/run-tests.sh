#!/usr/bin/env bash
# `make test` after the build: the Rust tests, and every pytest suite under tests/ (unit, contract,
# dataplane wire tests, ...): tests/unit and tests/contract beside the Rust tests' compilation, the
# rest after it. All always run; a summary comes last, and the exit status is non-zero if either
# language's tests failed. Full logs: build/test-logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:/root/.cargo/bin:$PATH"
logs=build/test-logs
mkdir -p "$logs"

# Python's own checks first: the project's modules compiled to bytecode (__pycache__, git-ignored;
# only what changed is compiled again). The tests start the command line, labs, probes and servers
# as new Python processes many hundreds of times; with PYTHONDONTWRITEBYTECODE set (as on the CI
# machine) and a fresh clone, each of them compiled every project module it imported from source,
# ~0.15 s per `p4netem` command. A module edited later is compiled from source again, as without this.
.venv/bin/python -m compileall -q control-plane studies tests examples

# The 20 slowest tests are listed at the end: make test must stay under about 30 minutes. Every
# test's setup, call and teardown time is in the JUnit files (pytest-unit.xml, pytest.xml), for
# finding where the time goes.
pytest_run() {  # pytest_run NAME ARGS...: one pytest session, its log and JUnit file named NAME
    local name=$1; shift
    .venv/bin/python -m pytest -rfEs --junitxml="$logs/$name.xml" -o junit_duration_report=total "$@" 2>&1 \
        | tee "$logs/$name.log"
    return "${PIPESTATUS[0]}"
}

# The Rust tests are compiled (a release build of the crate once more, with its tests: 1.5-2 minutes
# of both cores) while the suites that need neither the switch nor a namespace nor a clock run:
# tests/unit and tests/contract (pure Python, generous bounds where they time anything). Nothing
# that measures time or starts the switch runs beside the compiler; the rest waits for it.
# Arguments given to this script: one pytest run of exactly those, after cargo, as before.
echo "==> cargo test --release (dataplane), beside pytest tests/unit tests/contract"
(cd dataplane && cargo test --release > "../$logs/cargo.log" 2>&1) &
cargo_pid=$!
py_rc=0
if [ $# -eq 0 ]; then
    echo "==> pytest tests/unit tests/contract"
    pytest_run pytest-unit tests/unit tests/contract --durations=5 || py_rc=$?
fi
wait "$cargo_pid"
rust_rc=$?
cat "$logs/cargo.log"

echo "==> pytest tests/ (the rest)"
if [ $# -eq 0 ]; then
    pytest_run pytest tests --ignore=tests/unit --ignore=tests/contract --durations=20 || py_rc=$?
else
    rm -f "$logs/pytest-unit.log" "$logs/pytest-unit.xml"
    pytest_run pytest --durations=20 "$@" || py_rc=$?
fi

# Sum the per-binary "test result:" lines of cargo.
rust_summary=$(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) {
      if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i
    } } END { printf "%d passed, %d failed, %d ignored", p, f, g }' "$logs/cargo.log")
# pytest's last line of each run ("N passed, M failed, K skipped in T s"), the counts added up.
py_summary=$(for f in "$logs/pytest-unit.log" "$logs/pytest.log"; do
        [ -f "$f" ] && grep -E "^=+ .*(passed|failed|error|no tests ran).* =+$" "$f" | tail -1
    done | awk '{ for (i = 2; i <= NF; i++) { w = $i; sub(/,$/, "", w); if (w ~ /^(passed|failed|skipped|errors?|xfailed|xpassed)$/) n[w] += $(i-1) }
             } END { out = ""; split("passed failed errors error skipped xfailed xpassed", order, " ");
                     for (k = 1; k <= 7; k++) if (order[k] in n) out = out (out ? ", " : "") n[order[k]] " " order[k];
                     print out }')

status() { [ "$1" -eq 0 ] && echo "OK  " || echo "FAIL"; }
echo
echo "================ p4netem test summary ================"
printf "%s  rust   (cargo test): %s\n" "$(status $rust_rc)" "$rust_summary"
printf "%s  python (pytest)    : %s\n" "$(status $py_rc)" "${py_summary:-see $logs/pytest.log}"
echo "logs: $logs/cargo.log, $logs/pytest-unit.log, $logs/pytest.log (JUnit: $logs/pytest-unit.xml, $logs/pytest.xml)"
echo "======================================================"
[ "$rust_rc" -eq 0 ] && [ "$py_rc" -eq 0 ]
