"""AQM on the rate queue: CoDel's standing queue against tail drop's on the same link, and ECN.

Profile 1 uplink is a 10 Mbit/s link with a 1000-packet queue, once with tail drop and once with
CoDel (RFC 8289 defaults: target 5 ms, interval 100 ms). Through it, for SECONDS: one long loss-based TCP flow
(iperf3) and web-like short flows (a new TCP connection fetching SHORT_BYTES every SHORT_EVERY_S,
from a second pair of ports), plus a low-rate UDP probe (PROBE_PPS small datagrams) whose one-way
delay is its sojourn in the queue (the serialisation of a 100-byte frame is 80 us; the switch and
veths add tens of us). The figure is the probes' median delay over the second half of the run,
when the TCP flow has filled whatever queue the AQM lets it keep:

  codel_sojourn_ms_p50     bar: within 5 ms +/- 2 ms (CoDel's target); the long flow and the short
                           ones run CUBIC, Linux's default, which a user's host would run (set as
                           the sender's route `congctl`: this machine's namespaces may not make it
                           their default). One run's median is a coin toss (its 6 s hold only ~20
                           of CoDel's drop cycles; single runs gave 0.13-5.11 ms), so the run is
                           repeated CODEL_ROUNDS times and the figure is the median of the rounds'
                           medians; each round's, their range and the median of all rounds'
                           probes pooled are in aqm_config.codel_rounds
  codel_sojourn_ms_p50_4_flows
                           the same CoDel run with MANY_FLOWS long CUBIC flows instead of one
                           (iperf3 -P 4), MANY_ROUNDS rounds, median of their medians; no bar. A
                           drop then cuts one flow's window, about a quarter of the load, so the
                           flows keep a standing queue: the median lands above the target (8.7-9.6
                           ms per round on 2026-11-26) where one flow's lands below it (1.6-1.9
                           ms). CoDel's target bounds the sojourn's minimum over an interval, not
                           its median (docs/benchmarks.md, "AQM")
  codel_sojourn_ms_p50_rtt_<N>ms
                           the headline CoDel run (one long CUBIC flow, the same short flows) at
                           the other base RTTs of SWEEP_RTTS_MS, SWEEP_ROUNDS rounds each, median
                           of their medians; no bar. The issue names the link, the queue and the
                           flows but not the round trip, and the one-flow median moves with it
                           (6.90, 5.93, 1.81 and 2.37 ms at 10, 20, 40 and 80 ms in one run on
                           2026-11-27, 7.70, 5.47, 1.74 and 2.52 in the next; docs/benchmarks.md
                           "AQM"). The headline stays at
                           BASE_RTT_MS, chosen on 2026-11-25 before this was known; the sweep
                           shows where the bar holds, for the issue's owner to choose the RTT
  taildrop_sojourn_ms_p50  the same link with tail drop: the standing queue (no bar; shown with it)
  codel_sojourn_ms_p50_reno, taildrop_sojourn_ms_p50_reno
                           the same two with Reno (no bar; beta 0.5 halves the window at each drop,
                           which at this BDP empties the queue for a while, see docs/benchmarks.md)
  red_sojourn_ms_p50       RED with the Reno flows (min 30 KB, max 90 KB, max_p 10 %, tc's weight): bar: below max's
                           sojourn at the link rate, 72 ms (RED keeps the average below max; one
                           Reno flow halving its window often leaves the queue below min, so there
                           is no lower bar)
  gentle_red_sojourn_ms_p50  the same with gentle RED (bar: below 2 max, 144 ms)
  codel_reference_drop_agreement
                           the first headline CoDel round is captured at the switch's two ports
                           (tcpdump: what enters port 1, what reaches h2); its arrivals, replayed
                           through bench/codel_reference.py (RFC 8289's dequeue loop with Linux's
                           arithmetic and backlog rule, on the same 10 Mbit/s FIFO), give the
                           packets Linux's CoDel would drop: |same packets| / |either's drops|
                           (1.0: the switch dropped exactly those; no bar; counts in
                           aqm_config.codel_reference_check)

Then ECN: both hosts with net.ipv4.tcp_ecn=1 and the profile's `ecn` on, one TCP flow for
SECONDS: `ecn_marks` (profile_ecn_mark) and `ecn_aqm_drops` (drops of reason aqm_drop; the bar is
0: an ECN-capable flow is marked, not dropped).
"""
from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import codel_reference
from common import PY, one_way_ns, send, sink
from topo import Topo

from p4netem import pipeline as pl
from p4netem.replay.pcapfile import read_pcap
from p4netem_studies.web import tcp_tuning

RATE_BPS = 10_000_000
QUEUE_PKTS = 1000
SECONDS = 12
CODEL_ROUNDS = 5  # the headline CoDel run, repeated (see the docstring): 5 x ~14 s
PROBE_PPS = 50
PROBE_SIZE = 100
SHORT_BYTES = 60_000
SHORT_EVERY_S = 0.5
PORT = 5461
SHORT_PORT = 5462
CC = "cubic"  # the long flow of the headline figure: Linux's default
MANY_FLOWS = 4  # the same CoDel run with this many long CUBIC flows (no bar: see the docstring)
MANY_ROUNDS = 3
CC_COMPARED = "reno"
BASE_RTT_MS = 40
SWEEP_RTTS_MS = (10, 20, 80)  # the headline CoDel run at these base RTTs too (no bar; see the docstring)
SWEEP_ROUNDS = 3
CODEL = {"aqm": pl.Aqm.CODEL, "codel_target_ns": 5_000_000, "codel_interval_ns": 100_000_000}
RED_MIN, RED_MAX, RED_MAX_P = 30_000, 90_000, 0.10


def _red(gentle: bool) -> dict:
    """RED's params as the control plane encodes `aqm: {kind: red, min: 30KB, max: 90KB, probability: 10%}`."""
    from p4netem.profiles import Profile
    link = Profile.parse({"name": "red", "uplink": {
        "rate": f"{RATE_BPS}bit", "aqm": {"kind": "red", "min": RED_MIN, "max": RED_MAX, "probability": f"{RED_MAX_P * 100}%",
                                  "gentle": gentle}}}).uplink
    params = link.to_table_params()
    return {k: v for k, v in params.items() if k == "aqm" or k.startswith("red_")}

_SHORT_SERVER = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(64); print("ready", flush=True)
def drain(c):
    while c.recv(1 << 16):
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""
_SHORT_CLIENT = """
import socket, sys, time
dst, port, size, every, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
end, done = time.monotonic() + seconds, 0
while time.monotonic() < end:
    t = time.monotonic()
    c = socket.create_connection((dst, port), timeout=10)
    c.sendall(b"x" * size); c.close(); done += 1
    time.sleep(max(0.0, every - (time.monotonic() - t)))
print(done)
"""


def _ns_per_byte_q16(rate_bps: float) -> int:
    return round(8e9 / rate_bps * 65536)


def _iperf3(t: Topo, seconds: int, streams: int = 1) -> subprocess.CompletedProcess:
    """iperf3 from h1 to h2, `streams` TCP flows (its JSON names the congestion control the sender
    ran)."""
    srv = subprocess.Popen(t.netns(t.h2, "iperf3", "-s", "-1", "-p", "5201"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        return subprocess.run(t.netns(t.h1, "iperf3", "-c", t.h2.ip, "-p", "5201", "-t", str(seconds), "-P", str(streams), "-J"),
                              capture_output=True, text=True, timeout=seconds + 30)
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def loaded_sojourn(t: Topo, ctl, long_flows: int = 1, link: dict | None = None, before_traffic=None,
                   **aqm: int) -> dict:
    """Profile 1 uplink: `link` (default: RATE_BPS with a QUEUE_PKTS queue) and `aqm`; the long
    flows, the short ones and the probes for SECONDS (`before_traffic()` runs once the profile is
    set and the link idle); the second half's probe sojourns, drops and flows."""
    if link is None:
        link = {"ns_per_byte_q16": _ns_per_byte_q16(RATE_BPS), "queue_limit_pkts": QUEUE_PKTS}
    ctl.set_impairment(1, pl.UPLINK, **link, **aqm)
    if before_traffic is not None:
        before_traffic()
    before = ctl.counters(1, pl.UPLINK)
    server = subprocess.Popen(t.netns(t.h2, PY, "-c", _SHORT_SERVER, str(SHORT_PORT)), stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        long_flow: dict = {}
        th = threading.Thread(target=lambda: long_flow.update(r=_iperf3(t, SECONDS, long_flows)))
        th.start()
        short = subprocess.Popen(t.netns(t.h1, PY, "-c", _SHORT_CLIENT, t.h2.ip, str(SHORT_PORT), str(SHORT_BYTES),
                                         str(SHORT_EVERY_S), str(SECONDS)), stdout=subprocess.PIPE, text=True)
        with sink(t, t.h2, PORT, idle=2.0) as done:
            time.sleep(0.6)  # the long flow's handshake first
            sent = send(t, t.h1, t.h2.ip, PORT, PROBE_PPS * PROBE_SIZE * 8, PROBE_SIZE,
                        count=int(PROBE_PPS * (SECONDS - 1)), tx_stamps=True)
            rec = done()
        short_out, _ = short.communicate(timeout=SECONDS + 30)
        th.join(timeout=SECONDS + 60)
    finally:
        server.kill()
        server.wait()
    after = ctl.counters(1, pl.UPLINK)
    delays, _ = one_way_ns(rec, sent)
    n = sent["sent"]
    late = sorted(d for seq, d in delays.items() if seq >= n // 2)
    if not late:
        raise RuntimeError("no probe of the second half arrived")
    return {
        "sojourn_ms_p50": late[len(late) // 2] / 1e6,
        "late_sojourns_ms": [d / 1e6 for d in late],
        "sojourn_ms_p90": late[int(len(late) * 0.9)] / 1e6,
        "probes_sent": n, "probes_received": len(delays),
        "short_flows": int(short_out.strip() or 0),
        "aqm_drops": after.drops[pl.DropReason.AQM_DROP] - before.drops[pl.DropReason.AQM_DROP],
        "queue_full_drops": after.drops[pl.DropReason.QUEUE_FULL] - before.drops[pl.DropReason.QUEUE_FULL],
        "iperf3_ok": long_flow.get("r") is not None and long_flow["r"].returncode == 0,
        "long_flow_cc": sender_ran(long_flow.get("r")),
    }


def sender_ran(r: subprocess.CompletedProcess | None) -> str | None:
    """The congestion control iperf3's sending socket reported (TCP_CONGESTION)."""
    if r is None or r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)["end"].get("sender_tcp_congestion")
    except (ValueError, KeyError):
        return None


def _ecn(t: Topo, ctl) -> dict:
    for host in (t.h1, t.h2):
        subprocess.run(t.netns(host, "sysctl", "-qw", "net.ipv4.tcp_ecn=1"), check=True)
    try:
        ctl.set_impairment(1, pl.UPLINK, ns_per_byte_q16=_ns_per_byte_q16(RATE_BPS), queue_limit_pkts=QUEUE_PKTS,
                           ecn=1, **CODEL)
        before = ctl.counters(1, pl.UPLINK)
        r = _iperf3(t, SECONDS)
        after = ctl.counters(1, pl.UPLINK)
    finally:
        for host in (t.h1, t.h2):
            subprocess.run(t.netns(host, "sysctl", "-qw", "net.ipv4.tcp_ecn=2"), check=False)
    return {"marks": after.ecn_marked - before.ecn_marked,
            "aqm_drops": after.drops[pl.DropReason.AQM_DROP] - before.drops[pl.DropReason.AQM_DROP],
            "iperf3_ok": r.returncode == 0}


def sender_cc(t: Topo, cc: str) -> str:
    """Set the sending host's TCP congestion control; returns the one it had."""
    key = "net.ipv4.tcp_congestion_control"
    old = subprocess.run(t.netns(t.h1, "sysctl", "-n", key), capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(t.netns(t.h1, "sysctl", "-qw", f"{key}={cc}"), check=True)
    return old


def cubic_routes(t: Topo, on: bool) -> None:
    """CUBIC for every connection h1 opens (its routes' congctl), or the namespace default again.
    The machine's allowed list (reno bbr) keeps CUBIC from being the namespace's default, but a
    route may name any loaded algorithm (studies/p4netem_studies/web/tcp_tuning.py)."""
    tcp_tuning.set_route_congestion_control(t.h1.ns, CC if on else None)


def captured_frames(path: Path, src_ip: str | None, after_ns: int = 0) -> list[tuple[int, bytes | None, int]]:
    """(kernel stamp ns, identity, wire bytes) of a capture's frames stamped from `after_ns` on: the
    IPv4 frames from `src_ip`, or with None every frame. The identity is the IP header's addresses,
    protocol and id with the first 8 bytes of L4 (ports, TCP sequence), None for a frame that is not
    IPv4 (ARP); the wire bytes 14 + the IP total length (the capture keeps 96 bytes), at least 60
    for the others (the minimum frame)."""
    src = None if src_ip is None else bytes(int(x) for x in src_ip.split("."))
    out = []
    for ns, f in read_pcap(path):
        if ns < after_ns or len(f) < 14:
            continue
        ipv4 = len(f) >= 42 and f[12:14] == b"\x08\x00"
        if src is not None and not (ipv4 and f[26:30] == src):
            continue
        if ipv4:
            ihl = (f[14] & 15) * 4
            out.append((ns, f[18:20] + f[23:24] + f[26:34] + f[14 + ihl:22 + ihl],
                        14 + int.from_bytes(f[16:18], "big")))
        else:
            out.append((ns, None, max(len(f), 60)))
    return out


def missing_at_egress(arrivals: list[tuple[int, bytes | None, int]], egress: Path, src_ip: str) -> set[int]:
    """Indices of the IPv4 arrivals whose frame h2's capture does not have (as many times)."""
    arrived: dict[bytes | None, int] = {}
    for _, key, _ in captured_frames(egress, src_ip):
        arrived[key] = arrived.get(key, 0) + 1
    missing = set()
    for i, (_, key, _) in enumerate(arrivals):
        if key is None:
            continue
        if arrived.get(key, 0):
            arrived[key] -= 1
        else:
            missing.add(i)
    return missing


def drop_agreement(switch_drops: set[int], reference: set[int], aqm_drops: int, suffix: str = "") -> dict:
    """|same| / |either's drops|, void (None) unless every frame missing at h2 is one of the switch's
    AQM drops (else the capture lost frames)."""
    both = switch_drops & reference
    complete = len(switch_drops) == aqm_drops
    return {f"reference_drops{suffix}": len(reference), f"same{suffix}": len(both), "capture_complete": complete,
            f"agreement{suffix}": len(both) / max(1, len(switch_drops | reference)) if complete else None}


def _reference_check(t: Topo, ingress: Path, egress: Path, aqm_drops: int) -> dict:
    """The switch's CoDel drops in a captured round against the reference replay of its arrivals."""
    arrivals = captured_frames(ingress, t.h1.ip)
    switch_drops = missing_at_egress(arrivals, egress, t.h1.ip)
    ns_per_byte = round(8e9 / RATE_BPS)
    ref = {i for _, i in codel_reference.replay([a[0] for a in arrivals], [a[2] for a in arrivals], ns_per_byte)}
    return {"frames": len(arrivals), "switch_drops": len(switch_drops), "aqm_drops_counted": aqm_drops,
            **drop_agreement(switch_drops, ref, aqm_drops)}


@contextlib.contextmanager
def captured(t: Topo, out: dict, ingress_filter: str | None = None):
    """tcpdump on the switch's port 1 (frames from h1 entering the switch; `ingress_filter`, default
    h1's IPv4 frames) and on h2's device (h1's IPv4 frames the switch delivered) around the block;
    yields the two paths."""
    tmp = Path(tempfile.mkdtemp(prefix="p4nb-codel-"))
    paths = (tmp / "ingress.pcap", tmp / "egress.pcap")
    from_h1 = "ip and src host " + t.h1.ip
    caps = [subprocess.Popen([*pre, "tcpdump", "-i", dev, "-Q", "in", "-s", "96", "-n", "-B", "8192",
                              "--time-stamp-precision=nano", "-w", str(path), *expr.split()],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for pre, dev, path, expr in (([], t.ports[0], paths[0], from_h1 if ingress_filter is None else ingress_filter),
                                         (t.netns(t.h2)[:4], t.h2.dev, paths[1], from_h1))]
    try:
        time.sleep(1.0)  # tcpdump's socket open before the first frame
        yield paths
        time.sleep(0.5)
    finally:
        for c in caps:
            c.terminate()
            _, err = c.communicate(timeout=10)
            out.setdefault("tcpdump", []).append(" ".join(ln for ln in err.splitlines() if "dropped" in ln))
        out["dir"] = str(tmp)


def _pair(t: Topo, ctl, cc: str, codel_rounds: int = 1, capture: dict | None = None) -> tuple[dict, list[dict]]:
    """Tail drop, then CoDel `codel_rounds` times, with the long and short flows on `cc`; checks
    the sender ran it. With `capture`, the first CoDel round is checked against the reference."""
    tail = loaded_sojourn(t, ctl)
    codel = []
    for n in range(codel_rounds):
        if capture is not None and n == 0:
            with captured(t, capture) as (ingress, egress):
                codel.append(loaded_sojourn(t, ctl, **CODEL))
            capture.update(_reference_check(t, ingress, egress, codel[0]["aqm_drops"]))
            shutil.rmtree(capture["dir"], ignore_errors=True)
        else:
            codel.append(loaded_sojourn(t, ctl, **CODEL))
    for name, r in (("tail drop", tail), *(("CoDel", c) for c in codel)):
        if r["long_flow_cc"] not in (cc, None):
            raise RuntimeError(f"{name} run: the long flow ran {r['long_flow_cc']}, not {cc}")
    return tail, codel


def rounds_summary(runs: list[dict]) -> dict:
    """The rounds' medians, their median (the figure) and range, and the pooled probes' median."""
    p50s = [r["sojourn_ms_p50"] for r in runs]
    pooled = sorted(d for r in runs for d in r["late_sojourns_ms"])
    return {"rounds": len(runs), "p50_ms": p50s, "median_of_rounds_ms": statistics.median(p50s),
            "min_ms": min(p50s), "max_ms": max(p50s), "pooled_p50_ms": pooled[len(pooled) // 2],
            "pooled_p90_ms": pooled[int(len(pooled) * 0.9)], "pooled_probes": len(pooled),
            "aqm_drops": [r["aqm_drops"] for r in runs]}


def measure(t: Topo, ctl) -> dict:
    # Loss-based TCP, what bufferbloat studies and RFC 8289 are about: CUBIC (Linux's default, the
    # headline figure) and Reno. New namespaces default to BBR here, which keeps its own queue short
    # and would hide the standing queue; Reno is set as h1's default, CUBIC on h1's routes.
    old_cc = sender_cc(t, CC_COMPARED)
    # An access link's round trip: the ACK path (downlink) delays BASE_RTT_MS; the uplink (the
    # queue measured) has only the rate. Without it the flow's RTT is the queue alone, and no AQM
    # with RFC 8289's 100 ms interval holds one Reno flow at 5 ms (it needs a drop every few ms).
    ctl.set_impairment(1, pl.DOWNLINK, delay_ns=BASE_RTT_MS * 1_000_000)
    try:
        tail_reno, (codel_reno,) = _pair(t, ctl, CC_COMPARED)
        red = loaded_sojourn(t, ctl, **_red(gentle=False))
        gentle = loaded_sojourn(t, ctl, **_red(gentle=True))
        ecn = _ecn(t, ctl)
        cubic_routes(t, True)
        try:
            check: dict = {}
            tail, codel_runs = _pair(t, ctl, CC, CODEL_ROUNDS, capture=check)
            many_runs = [loaded_sojourn(t, ctl, MANY_FLOWS, **CODEL) for _ in range(MANY_ROUNDS)]
            sweep = {}
            for rtt_ms in SWEEP_RTTS_MS:
                ctl.set_impairment(1, pl.DOWNLINK, delay_ns=rtt_ms * 1_000_000)
                sweep[rtt_ms] = [loaded_sojourn(t, ctl, **CODEL) for _ in range(SWEEP_ROUNDS)]
        finally:
            cubic_routes(t, False)
    finally:
        sender_cc(t, old_cc)
        ctl.set_impairment(1, pl.UPLINK)
        ctl.set_impairment(1, pl.DOWNLINK)
    rounds = rounds_summary(codel_runs)
    many = rounds_summary(many_runs)
    by_rtt = {rtt_ms: rounds_summary(runs) for rtt_ms, runs in sweep.items()}
    codel = codel_runs[rounds["p50_ms"].index(sorted(rounds["p50_ms"])[len(codel_runs) // 2])]  # the median round
    for r in (tail, tail_reno, codel_reno, red, gentle, *codel_runs, *many_runs, *(x for runs in sweep.values() for x in runs)):
        r.pop("late_sojourns_ms")
    return {
        "codel_sojourn_ms_p50": rounds["median_of_rounds_ms"],
        "codel_sojourn_ms_p50_low": rounds["median_of_rounds_ms"],  # the same value, checked against 3 ms
        "codel_sojourn_ms_p50_min": rounds["min_ms"],
        "codel_sojourn_ms_p50_max": rounds["max_ms"],
        "codel_sojourn_ms_p50_pooled": rounds["pooled_p50_ms"],
        "codel_reference_drop_agreement": check.get("agreement"),
        f"codel_sojourn_ms_p50_{MANY_FLOWS}_flows": many["median_of_rounds_ms"],
        **{f"codel_sojourn_ms_p50_rtt_{rtt_ms}ms": r["median_of_rounds_ms"] for rtt_ms, r in by_rtt.items()},
        "taildrop_sojourn_ms_p50": tail["sojourn_ms_p50"],
        "codel_sojourn_ms_p50_reno": codel_reno["sojourn_ms_p50"],
        "taildrop_sojourn_ms_p50_reno": tail_reno["sojourn_ms_p50"],
        "red_sojourn_ms_p50": red["sojourn_ms_p50"],
        "gentle_red_sojourn_ms_p50": gentle["sojourn_ms_p50"],
        "ecn_marks": ecn["marks"],
        "ecn_aqm_drops": ecn["aqm_drops"],
        "aqm_config": {"congestion_control": CC, "congestion_control_compared": CC_COMPARED,
                       "red_congestion_control": CC_COMPARED, "base_rtt_ms": BASE_RTT_MS, "rate_bps": RATE_BPS, "queue_pkts": QUEUE_PKTS, "seconds": SECONDS,
                       "probe_pps": PROBE_PPS, "short_bytes": SHORT_BYTES, "short_every_s": SHORT_EVERY_S,
                       "codel": codel, "codel_rounds": {**rounds, "runs": codel_runs},
                       f"codel_{MANY_FLOWS}_flows_rounds": {**many, "runs": many_runs},
                       "codel_rtt_sweep": {f"{rtt_ms}ms": {**by_rtt[rtt_ms], "runs": runs} for rtt_ms, runs in sweep.items()},
                       "codel_reference_check": check, "tail_drop": tail, "codel_reno": codel_reno, "tail_drop_reno": tail_reno,
                       "ecn": ecn,
                       "red": {"min_bytes": RED_MIN, "max_bytes": RED_MAX, "max_p": RED_MAX_P, **red},
                       "gentle_red": gentle},
    }
