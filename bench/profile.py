"""Where the switch's cycles go: `perf record` of p4netem-switch in the two cases docs/dataplane.md's
profile section describes, on the bench topology (veths, offloads off):

  noimp  iperf3 TCP h1 -> h2, no impairment (the throughput_ratio_vs_bridge case)
  rate1g 1 Gbit/s shaping with 2x overload from p4netem-pktgen (rate.py's line-rate case)

For each: `perf record -g` of the switch process for the measurement's duration, then
`perf report --no-children --sort sym` (self time per symbol, kernel and user) and the data-plane
thread's share (--sort comm,tid) into OUT/<case>-*.txt. perf (apt linux-perf) and root are needed.

usage: .venv/bin/python bench/profile.py [--out build/profile] [--cases noimp,rate1g]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import control  # noqa: E402
import rate  # noqa: E402
import topo as topology  # noqa: E402
from common import iperf3_tcp  # noqa: E402
from p4netem.lab import SwitchProcess, unique_token  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def record(pid: int, out: Path, seconds: float) -> subprocess.Popen:
    return subprocess.Popen(["perf", "record", "-g", "-F", "999", "-p", str(pid), "-o", str(out),
                             "--", "sleep", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def report(data: Path, out_prefix: Path) -> None:
    for name, args in (("sym", ["--no-children", "--sort", "sym"]),
                       ("dso", ["--no-children", "--sort", "dso"]),
                       ("threads", ["--no-children", "--sort", "comm,tid"]),
                       ("callers", ["--no-children", "--sort", "sym", "-g", "caller,0.5,callee",
                                    "--percent-limit", "2"])):
        r = subprocess.run(["perf", "report", "-i", str(data), "--stdio", *args],
                           capture_output=True, text=True)
        Path(f"{out_prefix}-{name}.txt").write_text(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "build" / "profile"))
    ap.add_argument("--cases", default="noimp,rate1g")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = set(args.cases.split(","))
    t = topology.setup(topology.make(unique_token()))
    try:
        sw = SwitchProcess({1: t.ports[0], 2: t.ports[1]}, seed=1, log_path=out / "switch.log")
        with sw:
            ctl = control.Control(sw.grpc_addr, sw.device_id)
            ctl.start()
            try:
                if "noimp" in cases:
                    p = record(sw.proc.pid, out / "noimp.data", 8)
                    r = iperf3_tcp(t, t.h1, t.h2, 10)
                    p.wait()
                    print(f"noimp: iperf3 {r['gbit_s']:.2f} Gbit/s, load {open('/proc/loadavg').read().split()[:3]}")
                    report(out / "noimp.data", out / "noimp")
                if "rate1g" in cases:
                    ctl.classify_by_ingress_port()
                    # One record over the whole call: under load its set-up (profile write, queue fill) takes seconds.
                    p = record(sw.proc.pid, out / "rate1g.data", 25)
                    time.sleep(0.2)
                    r = rate.one_line_rate(t, ctl, 1e9, sw.proc.pid)
                    p.wait()
                    print(f"rate1g: error {r.get('error_pct')} %, dp thread {r.get('dp_thread_cpu_pct')} %, "
                          f"load {open('/proc/loadavg').read().split()[:3]}")
                    report(out / "rate1g.data", out / "rate1g")
            finally:
                ctl.close()
    finally:
        topology.teardown(t)
    print(f"reports in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
