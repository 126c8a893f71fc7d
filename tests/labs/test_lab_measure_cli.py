"""`p4netem measure` end to end: a small comparison prints its table and writes runs.csv,
summary.csv, results.json (with the run metadata the experiments ask for: kernel, congestion
control, TLS version, initial window, the TCP sysctls of every host) and plot.png; with DNS on,
the names resolve through dnsmasq and the lookups are recorded."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

P4NETEM = str(Path(sys.executable).parent / "p4netem")


def test_measure_writes_table_files_and_metadata(tmp_path):
    out = tmp_path / "res"
    proc = subprocess.run(
        [P4NETEM, "measure", "--profile", "lan", "--profile", "lte", "--protocol", "h1.1",
         "--protocol", "h2", "--iw", "3", "--iw", "10", "--reps", "2", "--topology",
         "multi-origin", "-p", "servers=2", "--page", "e5-site1", "--dns", "--dns-latency",
         "50ms", "--keep-pcaps", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "160"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "page-load time, median [q1-q3]" in proc.stdout
    runs = list(csv.DictReader(open(out / "runs.csv")))
    assert len(runs) == 2 * 2 * 2 * 2 and all(r["ok"] == "True" for r in runs)
    for r in runs:
        assert float(r["plt_ms"]) > 0 and int(r["connections_opened"]) >= 2
        assert r["tls_versions"] == "TLSv1.3"
        assert r["alpn"] == ("h2" if r["protocol"] == "h2" else "http/1.1")
        assert int(r["dns_lookups"]) == 2                    # e5-site1: two domains
        base = 25.0 if r["profile"] == "lte" else 0.2
        assert float(r["dns_ms_max"]) >= base + 50 - 1
    summary = list(csv.DictReader(open(out / "summary.csv")))
    assert len(summary) == 8 and all(s["ok"] == "2" for s in summary)
    doc = json.loads((out / "results.json").read_text())
    meta = doc["metadata"]
    assert meta["host"]["kernel"] and meta["software"]["nginx"].startswith("nginx version")
    env = meta["tcp_environment_by_initcwnd"]
    assert set(env) == {"3", "10"}
    for iw, hosts in env.items():
        for name in ("server1", "server2"):
            assert any(f"initcwnd {iw}" in route for route in hosts[name]["routes"])
            sysctls = hosts[name]["sysctls"]
            assert sysctls["net.ipv4.tcp_no_metrics_save"] == "1"
            assert sysctls["net.ipv4.tcp_slow_start_after_idle"] == "0"
            assert sysctls["net.ipv4.tcp_congestion_control"]
            assert sysctls["net.ipv4.tcp_sack"] is not None
    assert [p["profile"] for p in meta["profiles_applied"]] == ["lan", "lte"]
    png = (out / "plot.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    pcaps = sorted((out / "pcaps").glob("*.pcap"))                 # --keep-pcaps: one per load
    assert len(pcaps) == len(runs) and all(p.stat().st_size > 24 for p in pcaps)


def test_measure_records_the_radio_wake_up(tmp_path):
    """HSPA with the radio idled before each load against pre-woken: each idled load's first
    handshake pays the promotion, which the switch counts and reports (digests) for the client's
    UE; a pre-woken load pays none, its ping did. The table and the files say so."""
    out = tmp_path / "radio"
    proc = subprocess.run(
        [P4NETEM, "measure", "--profile", "hspa+radio", "--profile", "hspa+prewoken", "--protocol", "h2",
         "--iw", "10", "--reps", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "160"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "radio wake-ups" in proc.stdout and "1 x 1.80 s" in proc.stdout, proc.stdout[-3000:]
    runs = list(csv.DictReader(open(out / "runs.csv")))
    assert sorted(r["profile_label"] for r in runs) == ["hspa+prewoken"] * 2 + ["hspa+radio"] * 2
    for r in runs:
        assert r["ok"] == "True" and r["radio_applied"] == "True" and r["radio_idle"] == "reset"
        if r["profile_label"] == "hspa+radio":
            assert int(r["radio_promotions"]) == 1 and float(r["radio_wake_ms"]) == 1800.0
            assert 1700 <= float(r["handshake_excess_ms"]) <= 1950, r["handshake_excess_ms"]
            assert r["radio_prewake"] == ""
        else:
            assert int(r["radio_promotions"]) == 0 and r["radio_wake_ms"] == ""
            assert float(r["handshake_excess_ms"]) < 50
            assert r["radio_prewake"] == "ping" and float(r["radio_prewake_ms"]) >= 1800 + 90
    doc = json.loads((out / "results.json").read_text())
    cold = next(r for r in doc["runs"] if r["profile_label"] == "hspa+radio")
    assert [(e["old"], e["new"]) for e in cold["radio"]["events"]][:2] == [("IDLE", "PROMOTING"),
                                                                         ("PROMOTING", "DCH")]
    assert cold["radio"]["promotions_by_kind"] == {"IDLE_DCH": 1}
    assert cold["radio"]["idled"][0]["ue"] == 1


def test_measure_server_buffering(tmp_path):
    """--server-buffering serves plain HTTP/1.x from the buffering server (Apache, E1's
    conditions) and says so in the table, the rows and the run metadata; HTTP/2 in the same run
    keeps nginx. Without --plain it is a usage error naming the option."""
    bad = subprocess.run([P4NETEM, "measure", "--profile", "lan", "--protocol", "h1.1-pipelined",
                          "--server-buffering", "--out", str(tmp_path / "bad")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--server-buffering" in bad.stderr and "--plain" in bad.stderr, bad.stderr
    out = tmp_path / "buf"
    proc = subprocess.run(
        [P4NETEM, "measure", "--profile", "lan", "--protocol", "h1.1-pipelined", "--protocol", "h2",
         "--plain", "--server-buffering", "--revalidate", "--page", "microscape", "--reps", "1",
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "160"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = {r["protocol"]: r for r in csv.DictReader(open(out / "runs.csv"))}
    assert runs["h1.1-pipelined"]["variant"].endswith(" buffered") and runs["h1.1-pipelined"]["ok"] == "True"
    assert not runs["h2"]["variant"].endswith(" buffered") and runs["h2"]["ok"] == "True"
    meta = json.loads((out / "results.json").read_text())["metadata"]
    assert meta["server_output_buffering"] == [runs["h1.1-pipelined"]["key"]], meta["server_output_buffering"]
