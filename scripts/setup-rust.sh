#!/usr/bin/env bash
# A Rust toolchain new enough for the switch's crates (tonic 0.14 and its dependencies need
# rustc >= MIN). A cargo already on PATH (rustup's ~/.cargo/bin, which the Makefile puts first)
# is used when it is new enough; otherwise Debian 12's `cargo-web`/`rustc-web` (bookworm and
# bookworm-security; the toolchain Debian keeps current for Firefox and Chromium) is installed
# from apt, so a fresh Debian 12 machine needs nothing from outside its package registries.
# Debian's plain `cargo`/`rustc` packages (1.63) are too old.
set -euo pipefail
MIN=1.85

version_ok() {  # "rustc 1.96.0 (...)" -> is 1.96 >= MIN?
    local v
    v=$(rustc --version 2>/dev/null | awk '{print $2}') || return 1
    [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$MIN" "$v" | sort -V | head -1)" = "$MIN" ]
}

if command -v cargo >/dev/null 2>&1 && version_ok; then
    echo "rust: $(cargo --version), $(rustc --version)"
    exit 0
fi
echo "rust: no cargo with rustc >= $MIN on PATH; installing Debian's cargo-web and rustc-web"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q cargo-web rustc-web
hash -r
if ! version_ok; then
    echo "rust: rustc on PATH is $(rustc --version 2>/dev/null || echo missing), need >= $MIN" >&2
    echo "      (an older rustup toolchain in ~/.cargo/bin shadows /usr/bin: 'rustup update')" >&2
    exit 1
fi
echo "rust: $(cargo --version), $(rustc --version)"
