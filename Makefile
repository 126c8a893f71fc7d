# p4netem: install, build, test, bench, demo.
# Runs as root on Debian 12 (network namespaces and raw sockets need root).
# Stamp files under build/stamps keep repeated runs from redoing apt and pip work; they depend on
# the files that list the packages, so editing a list redoes that step.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# cargo from rustup lives in ~/.cargo/bin, which non-login shells (CI, sudo) often lack.
export PATH := $(HOME)/.cargo/bin:/root/.cargo/bin:$(PATH)

SYSTEM_PYTHON := /usr/bin/python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := build/stamps
SWITCH := dataplane/target/release/p4netem-switch
# Optional per-component setup scripts (idempotent); run by `make setup` when present.
EXTRA_SETUP := $(wildcard scripts/setup-web.sh)

.PHONY: all setup build test unit-test bench bench-experiments run switch-demo clean check-root check-cargo fuzz soak

all: build

check-root:
	@if [ "$$(id -u)" != 0 ]; then echo "p4netem needs root (namespaces, raw sockets): run as root." >&2; exit 1; fi

# A current Rust toolchain: rustup's if present, else Debian 12's cargo-web from apt.
check-cargo: | check-root
	bash scripts/setup-rust.sh

$(STAMPS)/system: scripts/setup-system.sh | check-root
	bash scripts/setup-system.sh
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/venv: control-plane/pyproject.toml studies/pyproject.toml $(STAMPS)/system
	@# Debian's python3 (mininet lives there) with system site packages; never a pyenv python.
	[ -x $(PY) ] || $(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e 'control-plane[test]' -e studies
	$(PY) -c "import p4netem.p4rt, p4netem_studies.harness"
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/extra: $(EXTRA_SETUP) $(STAMPS)/venv
	@for s in $(EXTRA_SETUP); do echo "running $$s"; bash $$s; done
	@mkdir -p $(STAMPS) && touch $@

setup: check-root check-cargo $(STAMPS)/system $(STAMPS)/venv $(STAMPS)/extra

# build.rs of the switch runs .venv/bin/python to dump the P4Runtime descriptors: needs the venv.
build: setup
	cd dataplane && cargo build --release

# Rust unit tests + every pytest suite under tests/; prints a summary, fails if either fails.
test: build
	@bash scripts/run-tests.sh

# Python unit tests only (no switch, no namespaces): quick feedback while editing.
unit-test: $(STAMPS)/venv
	$(PY) -m pytest -q tests/unit

bench: build
	@mkdir -p bench/results
	$(PY) bench/run.py --out bench/results/latest.json

# The parallel experiment runner against the serial one (speedup, fidelity, resume): about
# 10 minutes; figures in bench/results/experiments.json.
bench-experiments: build
	@mkdir -p bench/results
	$(PY) bench/experiments.py --out bench/results/experiments.json

# Malformed frames (10^6) and mutated P4Runtime requests (10^5) into a running switch with a probe
# flow (bench/fuzz.py); figures in bench/results/fuzz.json. make test runs a short version.
fuzz: build
	@mkdir -p bench/results
	$(PY) bench/fuzz.py --out bench/results/fuzz.json

# The switch at load for an hour (bench/soak.py): a flood through profiles a timeline switches
# every 100 ms, unimpaired flows on the kernel fast path, a radio flow with UEs waking and sleeping,
# P4Runtime reads; every 10 s packets are conserved exactly; figures (soak_conservation_errors,
# soak_rss_growth_mb) in bench/results/soak.json. make test runs a 30-s version (6 cycles of 5 s).
# SOAK_SECONDS=N for another length.
SOAK_SECONDS ?= 3600
soak: build
	@mkdir -p bench/results
	$(PY) bench/soak.py --seconds $(SOAK_SECONDS) --out bench/results/soak.json

# The product's main job: the inline Mininet lab, one page over HTTP/1.1 (6 connections per host),
# HTTP/2 and SPDY at server initial windows 3 and 10, under LAN, LTE, HSPA (radio on) and GPRS;
# a table, CSV/JSON and a plot in results/make-run/ (about 8 minutes: docs/labs.md).
run: build
	$(VENV)/bin/p4netem measure --preset make-run --out results/make-run

# The smallest demo: two hosts through the switch, ping and iperf3 before/after a profile.
switch-demo: build
	$(PY) scripts/demo.py

clean:
	cd dataplane && cargo clean
	rm -rf build bench/results/latest.json results .pytest_cache
	find . -name __pycache__ -type d -not -path './.venv*' -prune -exec rm -rf {} +
