"""`make run` demo: two hosts through p4netem-switch, before and after a profile is applied.

Builds namespaces h1 and h2 wired through the switch, measures ping RTT and TCP goodput (iperf3)
with no impairment, applies a profile over P4Runtime (40 ms delay and 10 Mbit/s each way, 128 KiB
queue), measures again, prints both as a table, and tears everything down.
Run with the project venv as root: .venv/bin/python scripts/demo.py
"""

from __future__ import annotations

import json
import subprocess
import re
import sys
import time

from rich.console import Console
from rich.table import Table

from p4netem.lab import Namespace, TwoHostLab
from p4netem.pipeline import DOWNLINK, UPLINK
from p4netem.profiles.profile import Profile

PROFILE = Profile.parse(
    {
        "name": "demo-40ms-10mbit",
        "title": "40 ms, 10 Mbit/s",
        "both": {"delay": "40ms", "rate": "10Mbit", "queue": {"bytes": "128KiB"}},
    }
)
console = Console()


def ping_rtt_ms(src: Namespace, dst_ip: str, count: int = 10) -> tuple[float, float, float, int]:
    """(min, avg, max) RTT in ms and the number of replies."""
    out = src.run(["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst_ip], check=False).stdout
    replies = re.search(r"(\d+) received", out)
    rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", out)
    if not rtt or not replies:
        raise RuntimeError(f"ping failed:\n{out}")
    return float(rtt.group(1)), float(rtt.group(2)), float(rtt.group(3)), int(replies.group(1))


def iperf_mbit(client: Namespace, server: Namespace, server_ip: str, seconds: int = 5) -> float:
    """TCP goodput from client to server in Mbit/s (iperf3, receiver side)."""
    srv = server.popen(["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if ":5201 " in server.run(["ss", "-Hltn"]).stdout:
            break
        time.sleep(0.05)
    out = client.run(["iperf3", "-c", server_ip, "-p", "5201", "-t", str(seconds), "-J"], timeout=seconds + 30)
    srv.wait(timeout=10)
    result = json.loads(out.stdout)
    if "error" in result:
        raise RuntimeError(f"iperf3: {result['error']}")
    return result["end"]["sum_received"]["bits_per_second"] / 1e6


def measure(lab: TwoHostLab) -> dict[str, float]:
    lo, avg, hi, replies = ping_rtt_ms(lab.h1.ns, lab.h2.ip)
    return {"rtt_min": lo, "rtt_avg": avg, "rtt_max": hi, "replies": replies,
            "tcp": iperf_mbit(lab.h1.ns, lab.h2.ns, lab.h2.ip)}


def main() -> int:
    with console.status("building namespaces h1, h2 and starting p4netem-switch"):
        lab = TwoHostLab().start()
    try:
        console.print(f"switch on {lab.switch.grpc_addr} (log {lab.switch.log_path}); "
                      f"h1 {lab.h1.ip} on port 1, h2 {lab.h2.ip} on port 2")
        with console.status("measuring with no impairment"):
            before = measure(lab)
        for direction in (UPLINK, DOWNLINK):
            lab.impair(direction, **PROFILE.to_table_params(direction))
        console.print(f"applied profile [bold]{PROFILE.title}[/] over P4Runtime to both directions")
        with console.status("measuring with the profile"):
            after = measure(lab)
        up = lab.counters(UPLINK)

        table = Table(title="h1 -> h2 through p4netem-switch")
        table.add_column("measure")
        table.add_column("no impairment", justify="right")
        table.add_column(PROFILE.title, justify="right")
        table.add_column("expected", justify="right")
        table.add_row("ping RTT min / avg / max (ms)",
                      f"{before['rtt_min']:.2f} / {before['rtt_avg']:.2f} / {before['rtt_max']:.2f}",
                      f"{after['rtt_min']:.2f} / {after['rtt_avg']:.2f} / {after['rtt_max']:.2f}",
                      ">= 80 (2 x 40 ms)")
        table.add_row("ping replies", f"{before['replies']:.0f}/10", f"{after['replies']:.0f}/10", "10/10")
        table.add_row("TCP goodput, iperf3 5 s (Mbit/s)", f"{before['tcp']:.1f}", f"{after['tcp']:.2f}",
                      "< 10 (rate)")
        console.print(table)
        reasons = ", ".join(f"{r.name.lower()} {n}" for r, n in up.drops.items() if n) or "none"
        console.print(f"uplink counters since start: in {up.profile_in}, out {up.profile_out}, "
                      f"dropped {up.dropped} ({reasons})")
    finally:
        with console.status("tearing down"):
            lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
