"""`dashboard_throughput_cost_pct`: what the dashboard and /metrics at 1 s refresh, with 1000
rules on the switch, cost its forwarding throughput.

A TwoHostLab with 1000 rules (999 for client addresses that send nothing, plus the rule for the
ports 1-2 traffic that iperf3 sends, all `lan`); iperf3 TCP h1 -> h2 without the web server, then
with `p4netem web --refresh 1` serving one live stream (/api/live, as an open dashboard) and a
Prometheus scrape of /metrics every second, alternated ROUNDS times in the same run. The figure is
1 - mean(with) / mean(without), in %; "with" starts once the web server has read the rules (its
first events and scrapes) and streams and scrapes at the refresh period. The stream and the
scrape share one StatsPoller read per refresh (control/stats_poller.py: profile_in of every pd,
the busy rules in full, the rules again only when they change): that is the load the switch's
P4Runtime server sees. web_server_cpu_cores is the web server's own CPU while iperf3 runs.

usage: .venv/bin/python bench/dashboard.py [--rounds 2] [--seconds 8] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from p4netem.control import Controller
from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port

RULES = 1000
P4NETEM = Path(sys.executable).parent / "p4netem"


def iperf3(lab: TwoHostLab, seconds: int) -> float:
    srv = lab.h2.ns.popen(["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        r = lab.h1.ns.run(["iperf3", "-c", lab.h2.ip, "-p", "5201", "-t", str(seconds), "-J"], timeout=seconds + 60)
        return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()


class DashboardLoad:
    """p4netem web, one reader of its live stream and a 1 s /metrics scraper."""

    def __init__(self, grpc_addr: str):
        self.port = free_tcp_port("127.0.0.1")
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([str(P4NETEM), "web", "--listen", f"127.0.0.1:{self.port}", "-s", grpc_addr,
                                      "--election-id", "3", "--refresh", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={k: v for k, v in os.environ.items() if not k.startswith("P4NETEM_")})
        self.stop = threading.Event()
        self.events = 0
        self.scrapes: list[float] = []
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.base + "/api/profiles", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("p4netem web did not start")
                time.sleep(0.2)
        self.threads = [threading.Thread(target=self._stream, daemon=True),
                        threading.Thread(target=self._scrape, daemon=True)]
        for t in self.threads:
            t.start()

    def _stream(self) -> None:
        with urllib.request.urlopen(self.base + "/api/live", timeout=60) as r:
            for line in r:
                if self.stop.is_set():
                    return
                if line.startswith(b"data:"):
                    self.events += 1

    def _scrape(self) -> None:
        next_t = time.monotonic()
        while not self.stop.is_set():
            t0 = time.monotonic()
            urllib.request.urlopen(self.base + "/metrics", timeout=60).read()
            self.scrapes.append(time.monotonic() - t0)
            next_t += 1.0
            self.stop.wait(max(0.0, next_t - time.monotonic()))

    def wait_running(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.events < 2 or len(self.scrapes) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError(f"p4netem web: {self.events} events, {len(self.scrapes)} scrapes in {timeout} s")
            time.sleep(0.2)

    def cpu_s(self) -> float:
        """CPU time the web server has used so far (user + system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.stop.set()
        self.proc.terminate()
        self.proc.wait(timeout=15)


def measure(rounds: int = 2, seconds: int = 8) -> dict:
    with TwoHostLab(seed=1).start() as lab:
        with Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
            ctl.reset()
            idle = [(f"client=10.1.{i // 250}.{i % 250 + 1}", "lan") for i in range(RULES - 1)]
            ctl.apply_many(idle + [("client.switch_port=1,server.switch_port=2", "lan")])
            assert len(ctl.applied()) == RULES
        without, with_load, events, scrape_s, web_cpu = [], [], 0, [], []
        for _ in range(rounds):
            without.append(iperf3(lab, seconds))
            load = DashboardLoad(lab.switch.grpc_addr)
            try:
                # Steady state: the web server has read the rules once (seconds with 1000
                # rules; then only counters) and both the stream and the scraper run.
                load.wait_running(timeout=300)
                time.sleep(2)
                cpu0, t0 = load.cpu_s(), time.monotonic()
                with_load.append(iperf3(lab, seconds))
                web_cpu.append((load.cpu_s() - cpu0) / (time.monotonic() - t0))
            finally:
                load.close()
            events += load.events
            scrape_s += load.scrapes
    a, b = sum(without) / len(without), sum(with_load) / len(with_load)
    return {
        "dashboard_throughput_cost_pct": (1 - b / a) * 100,
        "dashboard_config": {
            "rules": RULES, "refresh_s": 1, "rounds": rounds, "iperf3_seconds": seconds,
            "gbit_s_without": without, "gbit_s_with": with_load, "live_events": events,
            "metrics_scrape_s_median": sorted(scrape_s)[len(scrape_s) // 2] if scrape_s else None,
            # The web server's own CPU (cores) while iperf3 ran: what it takes from the machine.
            "web_server_cpu_cores": web_cpu,
            "loadavg": open("/proc/loadavg").read().split()[:3],
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    print("loadavg before:", open("/proc/loadavg").read().split()[:3], flush=True)
    res = measure(args.rounds, args.seconds)
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
