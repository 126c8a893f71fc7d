"""`p4netem experiment run` end to end, through the real switch in Mininet: the quickest
meaningful slices of E1 (the Microscape page on the 10 Mbit/s LAN, every client strategy,
first-time and revalidation, one load each) and E2 (16 web clients on the shared T1 bottleneck
for a short window). Each must come out as the study's table, its CSVs (with the TCP
environment columns), the comparison plot and experiment.json, with figures that follow from
the protocols and the bottleneck rather than from chance."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from lab_env import e2_short_warmup

P4NETEM = str(Path(sys.executable).parent / "p4netem")
PNG = b"\x89PNG\r\n\x1a\n"


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([P4NETEM, "experiment", "run", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "160"})


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([P4NETEM, "experiment", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "160"})


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(open(path)))


def test_experiment_slices_of_e1_and_e2(tmp_path):
    # E2 (a dumbbell lab and 2 + 12 s of its traffic) runs beside E1 (its labs and loads, then
    # the analysis again), not after it: they share nothing but the machine, and E1's figures
    # checked here are counts the protocols decide (connections, packets, bytes), not times.
    e2 = _start([str(e2_short_warmup(tmp_path)), "--quick", "--only", "initcwnd=4", "--only", "http=1.1",
                 "--duration", "12", "--out", str(tmp_path / "e2")])
    try:
        _e1_slice(tmp_path)
        stdout, stderr = e2.communicate(timeout=300)
    finally:
        if e2.poll() is None:
            e2.kill()
            e2.communicate()
    _e2_slice(tmp_path, subprocess.CompletedProcess(e2.args, e2.returncode, stdout, stderr))


def _e1_slice(tmp_path: Path) -> None:
    # ---- E1 on the LAN: 4 clients x (first-time, revalidation), one load each ----------------
    out = tmp_path / "e1"
    proc = _run(["e1-microscape", "--quick", "--reps", "1", "--only", "profile=lan-10mbit",
                 "--out", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "E1: Microscape" in proc.stdout
    table = {(r["client"], r["mode"]): r for r in _rows(out / "e1-table.csv")}
    assert set(table) == {(c, m) for c in ("http1.0", "http1.1", "pipelined",
                                           "pipelined+deflate") for m in ("-", "reval")}
    num = lambda c, m, k: float(table[(c, m)][k])                            # noqa: E731
    # HTTP/1.0 opens a connection per object (43); the others one.
    assert num("http1.0", "-", "connections_opened_median") == 43
    assert all(num(c, m, "connections_opened_median") == 1
               for c in ("http1.1", "pipelined", "pipelined+deflate") for m in ("-", "reval"))
    # Fewer packets with persistence, fewer again with pipelining (the 1997 paper's finding),
    # and deflate sends fewer bytes than the same client plain.
    assert (num("http1.0", "-", "packets_median") > num("http1.1", "-", "packets_median")
            > num("pipelined", "-", "packets_median"))
    assert num("pipelined+deflate", "-", "ip_bytes_median") < num("pipelined", "-",
                                                                 "ip_bytes_median") - 20_000
    # Revalidation moves 304s only: a small fraction of the first-time bytes, and the header
    # share of the bytes is larger.
    for c in ("http1.0", "http1.1", "pipelined"):
        assert num(c, "reval", "ip_bytes_median") < 0.3 * num(c, "-", "ip_bytes_median")
        assert 0 < num(c, "-", "header_overhead_pct_median") < num(c, "reval",
                                                                   "header_overhead_pct_median")
    runs = _rows(out / "runs.csv")
    assert len(runs) == 8 and all(r["ok"] == "True" for r in runs)
    assert {r["tcp_congestion_control"] for r in runs} == {"reno"}   # the definition's
    assert {(r["server_route_congctl"], r["client_route_congctl"],
             r["server_socket_congestion_control"], r["client_socket_congestion_control"])
            for r in runs} == {("reno",) * 4}
    assert all(r["kernel"] and r["server_route_initcwnd"] == "10" and r["tcp_sack"]
               for r in runs)
    assert (out / "e1.png").read_bytes()[:8] == PNG
    doc = json.loads((out / "experiment.json").read_text())
    assert doc["variant"] == "quick" and doc["plan"]["loads"] == 8 and doc["findings"]
    # The analysis runs again from the files alone and says the same.
    before = (out / "e1-table.csv").read_text()
    again = subprocess.run([P4NETEM, "experiment", "analyze", str(out)], capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "e1-table.csv").read_text() == before


def _e2_slice(tmp_path: Path, proc: subprocess.CompletedProcess) -> None:
    # ---- E2: 16 web clients on the T1, IW 4, HTTP/1.1 model, a short window -------------------
    out = tmp_path / "e2"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [run] = _rows(out / "runs.csv")
    assert run["ok"] == "True" and int(run["pages_ok"]) >= 10
    # A page is at least one round trip of the 100 ms bottleneck path (plus the handshake).
    assert float(run["page_delay_median_ms"]) >= 200
    util = float(run["utilisation_down"])
    assert 0.02 < util <= 1.05                         # the switch's own byte counters
    assert float(run["drop_rate_down_pct"]) >= 0 and int(run["packets_in_down"]) > 100
    # Goodput cannot exceed the bottleneck's rate (a page's bytes count when it completes, so a
    # large object that straddles the window's start may add a little to a short window).
    assert 0 < float(run["goodput_kbit"]) <= 1544 * 1.2
    assert run["server_route_initcwnd"] == "4" and run["tcp_congestion_control"] == "reno"
    # Every host's own 10 Mbit/s access link carried its share and stayed within its rate; the
    # busiest one (a client's, receiving) ran well below it behind the 1.544 Mbit/s bottleneck.
    assert int(run["access_links"]) == 8
    assert 0 < float(run["access_max_utilisation_to_host"]) <= 1544 / 10_000 * 1.3
    assert 0 < float(run["access_max_utilisation_from_host"]) <= 1544 / 10_000 * 1.3
    meta = json.loads((out / "results.json").read_text())["metadata"]
    assert sorted(meta["access_links"]) == [f"{r}{i}" for r in ("client", "server")
                                            for i in range(1, 5)]
    assert {a["profile"] for a in meta["access_links"].values()} == {"ethernet-10mbit"}
    [row] = _rows(out / "e2-table.csv")
    assert float(row["access_max_utilisation_to_host"]) == float(run["access_max_utilisation_to_host"])
    # Every server route, the per-client /32 ones with the IW included, carries reno.
    assert (run["server_route_congctl"], run["server_socket_congestion_control"]) == ("reno",) * 2
    pages = _rows(out / "pages.csv")
    assert len({p["host"] for p in pages}) == 4        # clients spread over the client hosts
    assert (out / "e2.png").read_bytes()[:8] == PNG


def test_e5_runs_cubic_on_every_route_without_the_machine_allowing_it(e5_h2_slice):
    """E5's definition asks for CUBIC (the 2011 servers'), which this machine's
    tcp_allowed_congestion_control does not list: the lab puts it on every route of every host,
    the probe connections' sockets run it on both sides, and nothing machine-wide changes.
    The run is the session's E5 slice (conftest.py: HTTP/2 on LTE and HSPA, shared with the
    report test), every load of it checked."""
    out, proc, allowed = e5_h2_slice
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = _rows(out / "runs.csv")
    assert "lte+radio" in {r["profile_label"] for r in runs}, runs
    for run in runs:
        assert run["ok"] == "True"
        assert (run["congestion_control_requested"], run["congestion_control_via"],
                run["server_route_congctl"], run["client_route_congctl"],
                run["server_socket_congestion_control"],
                run["client_socket_congestion_control"]) == (
            "cubic", "route congctl", "cubic", "cubic", "cubic", "cubic")
    meta = json.loads((out / "results.json").read_text())["metadata"]
    cc = meta["tcp_sysctls_set"]["congestion_control"]
    assert cc["machine_changed"] is False and len(cc["probes"]) == 4      # one per server
    assert all((p["client"], p["server"]) == ("cubic", "cubic") for p in cc["probes"])
    assert Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text() == allowed
