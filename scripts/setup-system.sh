#!/usr/bin/env bash
# Installs the Debian packages p4netem needs. Idempotent; safe to re-run.
# Kept as the one place that lists apt dependencies, so a fresh Debian 12 machine (and CI) gets
# exactly what a developer machine has.
set -euo pipefail
PKGS=(
  build-essential pkg-config python3-venv python3-dev
  iproute2 procps ethtool iperf3 iputils-ping tcpdump
  # bench/profile.py: where the switch's cycles go (perf record / report)
  linux-perf
  # p4netem replay: sends a capture into switch port 1
  tcpreplay
  mininet
  # web labs (p4netem_studies.web): servers, TLS, client tools, headless browser, capture/filters in tests
  nginx-light nghttp2-client curl openssl ca-certificates chromium nftables
  # E1's pipelining server: Apache buffers responses to pipelined requests (the binary and
  # modules only: the `apache2` package would also start a system-wide service on port 80)
  apache2-bin
  python3-h2 python3-cryptography
  # Mininet labs: a name server on a lab host for multi-domain pages (the binary only: the
  # `dnsmasq` package would also start a system-wide service on port 53)
  dnsmasq-base
  # tests/appliance/test_prometheus_grafana.py: a real Prometheus (and promtool) scrapes the web
  # face as docs/web.md configures it and runs the Grafana dashboard's queries (the test starts
  # its own on a free port; Debian 12's 2.42: 22.5 MB to fetch, ~330 MB installed, most of it
  # libjs-moment-timezone, a hard dependency of its web UI)
  prometheus
  # tests/appliance/test_systemd_unit.py: boots systemd as PID 1 in namespaces of its own (no
  # systemd-nspawn) to run the shipped unit; there where a container image left systemd out
  systemd
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The package enables a system-wide Prometheus (port 9090, scraping itself) where systemd runs:
# the tests start their own, so keep that one off (as apache2-bin and dnsmasq-base avoid theirs).
if [ -d /run/systemd/system ] && systemctl is-enabled --quiet prometheus.service 2>/dev/null; then
  systemctl disable --now prometheus.service
fi
