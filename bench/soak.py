"""`make soak`: the switch at load for a long time, with exact packet conservation (issue 13).

Traffic (p4netem-pktgen, 64-byte UDP frames on an AF_PACKET TX ring):
- uplink h1 -> h2 as fast as the sender's ring takes them (the switch's maximum rate: its RX ring
  overflows), to 64 server addresses: 10.97.0.0/27 is rule MIX, whose profile a timeline switches
  every 100 ms (delay+jitter, a 2 Mbit/s rate with a full 50-packet queue, loss+duplication with a
  bursty-loss downlink, CoDel on a 5 Mbit/s queue); 10.97.0.32/27 is rule FULL, a 1 Mbit/s link
  whose queue is full all along; 10.97.0.64/27 matches no rule: unimpaired, so after each flow's
  first packet the kernel fast path (issue 14, an XDP flow cache) forwards it, and every write of
  the timeline (which bumps the fast path's epoch) sends the flows' next packets back through the
  pipeline to be installed again.
- downlink h2 -> h1 at RADIO_PPS to RADIO_UES client addresses of rule RADIO (LTE radio, UE by
  address, 500 ms tail): each UE sees a packet every ~2 s, so UEs fall asleep and are woken
  (a promotion holds their packets) all the time.
The timeline's flips, the prepared writes before each flip and a counter Read per second from a
second, read-only client are the P4Runtime traffic during the run.

Each CYCLE_S cycle: traffic for CYCLE_S - QUIET_S; then the senders stop, and once the switch has
released everything (it must within DRAIN_S: anything still held then is an error) the counters
are read and checked exactly against the kernels' own counts, for the packets of that cycle:
  sent_by_pktgen      == tx_packets + tx_dropped of the sending host's veth
  for every pd:       in + dup == out + drops by reason   (held == 0: nothing left behind)
  out of the cycle    == rx_packets of the receiving host's veth (what the switch sent arrived)
  in of the cycle     <= tx_packets of the sending host (the rest overflowed the switch's RX ring)
and at the end, from the switch's own shutdown report of its RX rings:
  sending host's tx_packets (whole run) == the ring's kernel_rx + fast-path packets;
  kernel_rx - ring drops + fast-path packets == in
(the fast path's packets never reach the ring: the switch's /metrics counts them, and they are in
the pds' in and out counters like every other packet).
During traffic, every second: no pd's held count (in + dup - out - drops) is ever negative.
`soak_conservation_errors` is the number of packets by which any of these fails (bar: 0).

Memory: the switch's VmRSS after the warm-up (WARMUP_FRACTION of the run, at least one cycle)
and at the end: `soak_rss_growth_mb` (bar: flat), and where it went: `soak_rss_growth_by_mapping`
(from /proc/PID/smaps; the packet pool's slab is the anonymous mapping of about `soak_buffers`
buffers' size, paged in as more packets are held at once than ever before).

usage: .venv/bin/python bench/soak.py [--seconds 3600] [--seed S] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc

from p4netem import pipeline as pl
from p4netem.control import Controller, Profile, Rule, Timeline
from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port
from p4netem.lab.twohost import Host
from p4netem.p4rt import P4RuntimeError, build_counter_entry
from p4netem.radio import read_promotions
from p4netem.switch_health import SwitchHealth

ROOT = Path(__file__).resolve().parents[1]
PKTGEN = ROOT / "dataplane" / "target" / "release" / "p4netem-pktgen"

CYCLE_S = 10.0
QUIET_S = 2.0  # of each cycle: drain, check, the UEs' radios fall asleep
DRAIN_S = 8.0  # the longest anything may stay held once the senders stopped
STEP_MS = 100
WARMUP_FRACTION = 0.1
READ_TIMEOUT_S = 60.0
UP_SENDERS = 2  # one sender alone does not outrun the switch (its RX ring never overflowed)
FRAME = 64
SERVERS = "10.97.0.0"  # + i % SERVER_COUNT: the uplink flood's destinations
SERVER_COUNT = 96  # /27 MIX, /27 FULL and a /27 no rule matches (the fast path's)
FAST_FLOWS = 32  # 10.97.0.64-95: the destinations no rule matches
RADIO_NET, RADIO_UES, RADIO_PPS = "10.96.0.0", 3000, 1500

MIX = [
    {"name": "soak-delay", "both": {"delay": "20ms", "jitter": "5ms"}},
    {"name": "soak-rate", "both": {"rate": "2Mbit", "queue": {"packets": 50}, "delay": "2ms"}},
    {"name": "soak-loss", "uplink": {"loss": "5%", "duplicate": "5%"},
     "downlink": {"gilbert_elliott": {"p": "1%", "r": "30%", "loss_bad": "80%"}}},
    {"name": "soak-codel", "both": {"rate": "5Mbit", "queue": {"packets": 500}, "aqm": "codel"}},
]
FULL = {"name": "soak-full", "both": {"rate": "1Mbit", "queue": {"packets": 20}}}
RADIO = {"name": "soak-radio", "both": {"delay": "5ms"},
         "radio": {"model": "lte", "promotion": "100ms", "drx_inactivity": "100ms", "tail": "500ms"}}
RULE_MIX = Rule.model_validate({"server": "10.97.0.0/27"})
RULE_FULL = Rule.model_validate({"server": "10.97.0.32/27"})
RULE_RADIO = Rule.model_validate({"client": "10.96.0.0/20", "ue": "by-address"})


def _link(host: Host) -> dict[str, int]:
    """The kernel's counters of the host's veth end (in its namespace)."""
    out = host.ns.run(["ip", "-j", "-s", "link", "show", host.iface]).stdout
    s = json.loads(out)[0]["stats64"]
    return {"tx": s["tx"]["packets"], "tx_dropped": s["tx"]["dropped"],
            "rx": s["rx"]["packets"], "rx_dropped": s["rx"]["dropped"]}


def _pktgen(src: Host, dst: Host, dst_ip: str, dst_count: int, seconds: float, rate: float) -> subprocess.Popen:
    return src.ns.popen([str(PKTGEN), "--iface", src.iface, "--src-mac", src.mac, "--dst-mac", dst.mac,
                         "--src-ip", src.ip, "--dst-ip", dst_ip, "--dst-count", str(dst_count),
                         "--size", str(FRAME), "--duration", str(seconds), "--rate", str(rate)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _sent(proc: subprocess.Popen) -> int:
    out, err = proc.communicate(timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"p4netem-pktgen failed: {err.strip()}")
    return int(json.loads(out)["sent"])


class Counters:
    """All pds' packet counters, read over P4Runtime: pd -> (in, dup, out, drops by reason)."""

    def __init__(self, ctl: Controller):
        self.client = ctl.client
        self.known: set[int] = set()  # pds that have seen packets

    def read(self) -> dict[int, dict]:
        """Out and drops are read before in and dup: counters only grow and a packet is counted in
        (or as a copy) before it is counted out or dropped, so a snapshot read in this order can
        show packets held, never fewer than none, even while traffic flows."""
        c = self.client
        out = c.read_counter(pl.PROFILE_OUT)
        self.known |= {pd for pd, v in out.items() if v.packets}
        pds = sorted(self.known)
        drops: dict[int, int] = {}
        if pds:
            entities = [build_counter_entry(c.info, pl.DROPS, pl.drop_index(pd, r))
                        for pd in pds for r in pl.DropReason]
            for e in c.read(*entities):
                drops[e.counter_entry.index.index] = e.counter_entry.data.packet_count
        dup = c.read_counter(pl.PROFILE_DUP)
        inn = c.read_counter(pl.PROFILE_IN)
        new = {pd for pd, v in inn.items() if v.packets} - self.known
        if new:  # a pd seen for the first time: read again with its drops in the snapshot
            self.known |= new
            return self.read()
        result = {}
        for pd in pds:
            by_reason = {r.name.lower(): drops.get(pl.drop_index(pd, r), 0) for r in pl.DropReason}
            result[pd] = {"in": inn.get(pd, _ZERO).packets, "dup": dup.get(pd, _ZERO).packets,
                          "out": out.get(pd, _ZERO).packets, "drops": by_reason}
        return result


class _Zero:
    packets = 0


_ZERO = _Zero()


def held(c: dict) -> int:
    return c["in"] + c["dup"] - c["out"] - sum(c["drops"].values())


def totals(counters: dict[int, dict], direction: int) -> dict[str, int]:
    t = {"in": 0, "dup": 0, "out": 0, "dropped": 0, "held": 0}
    drops: dict[str, int] = {}
    for pd, c in counters.items():
        if pd % 2 != direction:
            continue
        for k in ("in", "dup", "out"):
            t[k] += c[k]
        t["dropped"] += sum(c["drops"].values())
        t["held"] += held(c)
        for r, v in c["drops"].items():
            drops[r] = drops.get(r, 0) + v
    t["drops"] = {r: v for r, v in drops.items() if v}  # type: ignore[assignment]
    return t


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _rss_by_mapping(pid: int) -> dict[str, tuple[str, int, int]]:
    """The switch's resident memory per mapping: start address -> (what it maps, size kB, RSS kB).
    Keyed by start, since a malloc arena or the heap grows at its end."""
    out: dict[str, tuple[str, int, int]] = {}
    start = name = ""
    size = 0
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:
            start = head[0].split("-")[0]
            name = head[5] if len(head) > 5 else "[anon]"
        elif head[:1] == ["Size:"]:
            size = int(head[1])
        elif head[:1] == ["Rss:"]:
            out[start] = (name, size, int(head[1]))
    return out


def _rss_growth_by_mapping(warm: dict, end: dict, at_least_kb: int = 64) -> list[dict]:
    """The mappings whose RSS changed by `at_least_kb` or more between the two snapshots, the
    largest growth first: where `soak_rss_growth_mb` went (the packet pool's slab, which pages
    in as more buffers are held at once than ever before; the heap; malloc's per-thread arenas)."""
    rows = []
    for start in warm.keys() | end.keys():
        name, size, _ = end.get(start) or warm[start]
        rss_warm, rss_end = warm.get(start, ("", 0, 0))[2], end.get(start, ("", 0, 0))[2]
        if abs(rss_end - rss_warm) >= at_least_kb:
            rows.append({"mapping": name, "start": start, "size_mb": round(size / 1024, 1),
                         "rss_mb_after_warmup": round(rss_warm / 1024, 2),
                         "rss_mb_end": round(rss_end / 1024, 2)})
    return sorted(rows, key=lambda r: r["rss_mb_after_warmup"] - r["rss_mb_end"])


def _timeline(rng: random.Random, seconds: float) -> Timeline:
    steps = []
    names = [p["name"] for p in MIX]
    for i in range(int(seconds * 1000 / STEP_MS)):
        steps.append({"at": f"{i * STEP_MS}ms", "apply": rng.choice(names)})
    return Timeline.parse({"name": "soak", "profiles": MIX, "steps": steps})


class _LiveReader(threading.Thread):
    """During traffic: one counter Read a second (P4Runtime reads while the flood and the timeline
    run); every held count must be >= 0 (a negative one is a counting error)."""

    def __init__(self, counters: Counters):
        super().__init__(daemon=True)
        self.counters = counters
        self.stop = threading.Event()
        self.reads = 0
        self.slow = 0
        self.negative = 0
        self.max_held = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.wait(1.0):
                try:
                    snap = self.counters.read()
                except P4RuntimeError as err:
                    if err.code != grpc.StatusCode.DEADLINE_EXCEEDED:
                        raise
                    self.slow += 1  # the machine is busy; the quiet-phase checks are the exact ones
                    continue
                self.reads += 1
                for c in snap.values():
                    h = held(c)
                    self.negative += -h if h < 0 else 0
                self.max_held = max(self.max_held, sum(max(0, held(c)) for c in snap.values()))
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            self.error = err


def _ring_report(log: str) -> dict[int, tuple[int, int]]:
    """port -> (kernel_rx, kernel_ring_drops) from the switch's shutdown lines."""
    report = {}
    for m in re.finditer(r"port down port=(\d+) iface=\S+ kernel_rx=(\d+) kernel_ring_drops=(\d+)", log):
        report[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return report


def run(seconds: float, seed: int = 13, log_path: Path | None = None, progress=None,
        cycle_s: float = CYCLE_S) -> dict:
    """Soak for `seconds` (whole cycles of `cycle_s`, at least 2); returns the figures (see the
    module doc). `make soak` keeps CYCLE_S; make test's short run takes shorter cycles, so that it
    still has as many pauses (each one's exact checks) in less time."""
    if not PKTGEN.exists():
        raise RuntimeError(f"{PKTGEN} is missing: build the dataplane crate (make build)")
    if not QUIET_S < cycle_s:
        raise ValueError(f"cycle_s: {cycle_s} s leaves no traffic; it must be more than QUIET_S ({QUIET_S} s)")
    rng = random.Random(seed)
    cycles = max(2, round(seconds / cycle_s))
    warmup_cycles = max(1, int(cycles * WARMUP_FRACTION))
    traffic_s = cycle_s - QUIET_S
    errors: list[str] = []
    error_packets = 0
    per_cycle = []
    rss_cycles: list[int] = []  # the switch's VmRSS (kB) at the end of each cycle
    t0 = time.monotonic()
    metrics_port = free_tcp_port("127.0.0.1")
    # A log of our own: the rings' shutdown report is read from it after the lab closed, and a
    # switch's default /tmp log is removed at a normal stop.
    log_path = log_path or ROOT / "build" / "soak-switch.log"
    lab = TwoHostLab(seed=seed, log_path=log_path,
                     switch_args=("--metrics-addr", f"127.0.0.1:{metrics_port}")).start()
    health = SwitchHealth(f"http://127.0.0.1:{metrics_port}/metrics", timeout_s=READ_TIMEOUT_S)
    ctl = reader_ctl = None
    try:
        pid = lab.switch.proc.pid
        # Reads of every counter take long on a loaded 2-core machine: generous deadlines.
        ctl = Controller.connect(lab.switch.grpc_addr, device_id=lab.switch.device_id, election_id=2,
                                 timeout=READ_TIMEOUT_S)
        for p in MIX + [FULL, RADIO]:
            ctl.add_profile(Profile.parse(p))
        ctl.apply("soak-full", [RULE_FULL])
        ctl.apply("soak-radio", [RULE_RADIO])
        ctl.apply("soak-delay", [RULE_MIX])
        reader_ctl = Controller.connect(lab.switch.grpc_addr, device_id=lab.switch.device_id, primary=False,
                                        timeout=READ_TIMEOUT_S)
        counters = Counters(reader_ctl)
        prev = counters.read()
        prev_h1, prev_h2 = _link(lab.h1), _link(lab.h2)
        rss_warm = rss_start = _rss_kb(pid)
        maps_warm = _rss_by_mapping(pid)
        prev_fast = health.summary()["fast_path"]
        sent_total = {"up": 0, "down": 0}
        reader = _LiveReader(counters)
        reader.start()
        for cycle in range(cycles):
            ups = [_pktgen(lab.h1, lab.h2, SERVERS, SERVER_COUNT, traffic_s, 0) for _ in range(UP_SENDERS)]
            down = _pktgen(lab.h2, lab.h1, RADIO_NET, RADIO_UES, traffic_s, RADIO_PPS)
            result = ctl.run_timeline(_timeline(rng, traffic_s - 0.3), [RULE_MIX])
            sent = {"up": sum(_sent(up) for up in ups), "down": _sent(down)}
            late = max(result.errors_ms, default=0.0)
            # Quiet: everything held must come out within DRAIN_S.
            deadline = time.monotonic() + DRAIN_S
            while True:
                now = counters.read()
                still = {pd: held(c) for pd, c in now.items() if held(c)}
                if not still or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            h1, h2 = _link(lab.h1), _link(lab.h2)
            fast = health.summary()["fast_path"]
            cyc = {"cycle": cycle, "sent": sent, "timeline_max_late_ms": round(late, 2),
                   "fast_path": {k: fast[k] - prev_fast[k] for k in ("packets", "installs")}}
            if still:
                n = sum(abs(v) for v in still.values())
                errors.append(f"cycle {cycle}: {n} packets still held {DRAIN_S} s after the senders stopped: {still}")
                error_packets += n
            for name, direction, src, src_prev, dst, dst_prev, key in (
                    ("uplink", pl.UPLINK, h1, prev_h1, h2, prev_h2, "up"),
                    ("downlink", pl.DOWNLINK, h2, prev_h2, h1, prev_h1, "down")):
                a, b = totals(now, direction), totals(prev, direction)
                d = {k: a[k] - b[k] for k in ("in", "dup", "out", "dropped")}
                tx = src["tx"] - src_prev["tx"]
                tx_dropped = src["tx_dropped"] - src_prev["tx_dropped"]
                rx = dst["rx"] - dst_prev["rx"]
                checks = [
                    ("pktgen sent == sender veth tx + tx_dropped", sent[key], tx + tx_dropped),
                    ("switch in + dup == out + drops", d["in"] + d["dup"], d["out"] + d["dropped"]),
                    ("switch out == receiver veth rx", d["out"], rx),
                ]
                for what, x, y in checks:
                    if x != y:
                        errors.append(f"cycle {cycle} {name}: {what}: {x} != {y}")
                        error_packets += abs(x - y)
                if d["in"] > tx:
                    errors.append(f"cycle {cycle} {name}: switch in {d['in']} > sender tx {tx}")
                    error_packets += d["in"] - tx
                cyc[name] = {**d, "sender_tx": tx, "receiver_rx": rx, "ring_overflow": tx - d["in"],
                             "drops": {r: a["drops"].get(r, 0) - b["drops"].get(r, 0)
                                       for r in a["drops"] if a["drops"].get(r, 0) != b["drops"].get(r, 0)}}
                sent_total[key] += sent[key]
            per_cycle.append(cyc)
            prev, prev_h1, prev_h2, prev_fast = now, h1, h2, fast
            rss_cycles.append(_rss_kb(pid))
            if cycle + 1 == warmup_cycles:
                rss_warm, maps_warm = rss_cycles[-1], _rss_by_mapping(pid)
            if reader.error is not None:
                raise reader.error
            if not lab.switch.running():
                errors.append(f"cycle {cycle}: the switch exited")
                break
            if progress:
                progress(cyc, error_packets)
        reader.stop.set()
        reader.join(timeout=30)
        rss_end, maps_end = _rss_kb(pid), _rss_by_mapping(pid)
        buffers = health.summary()["buffers"]
        promotions = sum(sum(k.values()) for k in read_promotions(reader_ctl.client, range(RADIO_UES)).values())
        error_packets += reader.negative
        if reader.negative:
            errors.append(f"a held count went negative during traffic (by {reader.negative} packets)")
        final = prev
        end_h1, end_h2, fast_end = prev_h1, prev_h2, prev_fast
    finally:
        for c in (reader_ctl, ctl):
            if c is not None:
                c.close()
        lab.close()
    # The RX rings, from the switch's shutdown report: what the kernel gave each ring (and what
    # it dropped because the ring was full) against the senders' counts and the switch's `in`.
    log = Path(lab.switch.log_path).read_text(errors="replace")
    rings = _ring_report(log)
    ring = {}
    # Only the uplink has unimpaired flows (the downlink is all radio): every fast-path packet is
    # the uplink's, and one on the downlink fails both checks.
    fast_packets = fast_end["packets"]
    for port, direction, fast_in, src_end, name in ((1, pl.UPLINK, fast_packets, end_h1, "uplink"),
                                                   (2, pl.DOWNLINK, 0, end_h2, "downlink")):
        if port not in rings:
            errors.append(f"no shutdown report of port {port} in the switch log")
            error_packets += 1
            continue
        kernel_rx, ring_drops = rings[port]
        # The ring counts from the switch's start; the lab's set-up sends nothing (static ARP, no IPv6).
        tx = src_end["tx"]
        read_by_switch = totals(final, direction)["in"]
        ring[name] = {"kernel_rx": kernel_rx, "ring_drops": ring_drops, "fast_path": fast_in, "sender_tx": tx,
                      "switch_in": read_by_switch}
        for what, x, y in (("sender tx == ring kernel_rx + fast path", tx, kernel_rx + fast_in),
                           ("ring kernel_rx - ring drops + fast path == switch in",
                            kernel_rx - ring_drops + fast_in, read_by_switch)):
            if x != y:
                errors.append(f"{name}: {what}: {x} != {y}")
                error_packets += abs(x - y)
    up_total, down_total = totals(final, pl.UPLINK), totals(final, pl.DOWNLINK)
    return {
        "soak_conservation_errors": error_packets,
        "soak_rss_growth_mb": round((rss_end - rss_warm) / 1024, 2),
        "soak_rss_mb": {"start": round(rss_start / 1024, 1), "after_warmup": round(rss_warm / 1024, 1),
                        "end": round(rss_end / 1024, 1),
                        "max_after_warmup": round(max(rss_cycles[warmup_cycles - 1:], default=0) / 1024, 1),
                        "warmup_cycles": warmup_cycles},
        "soak_rss_growth_by_mapping": _rss_growth_by_mapping(maps_warm, maps_end),
        "soak_buffers": buffers,
        "soak_seconds": round(time.monotonic() - t0, 1),
        "soak_cycles": len(per_cycle),
        "soak_packets_sent": sent_total,
        "soak_uplink": up_total,
        "soak_downlink": down_total,
        "soak_rings": ring,
        "soak_radio_promotions": promotions,
        # Since the switch's start, as the rings' counts.
        "soak_fast_path": {k: fast_end[k] for k in ("state", "packets", "installs")},
        "soak_rss_mb_by_cycle": [round(v / 1024, 1) for v in rss_cycles[::max(1, len(rss_cycles) // 60)]],
        "soak_live_reads": reader.reads,
        "soak_live_reads_timed_out": reader.slow,
        "soak_live_max_held": reader.max_held,
        "soak_timeline_max_late_ms": max((c["timeline_max_late_ms"] for c in per_cycle), default=None),
        "soak_errors": errors[:50],
        "soak_seed": seed,
        "soak_cycle_first": per_cycle[0] if per_cycle else None,
        "soak_cycle_last": per_cycle[-1] if per_cycle else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    ap.add_argument("--log", type=Path, default=None, help="the switch's log (default: build/soak-switch.log)")
    args = ap.parse_args()

    def progress(cyc: dict, errs: int) -> None:
        print(f"cycle {cyc['cycle']}: up in {cyc['uplink']['in']} out {cyc['uplink']['out']} "
              f"ring overflow {cyc['uplink']['ring_overflow']} fast path {cyc['fast_path']['packets']}; "
              f"down in {cyc['downlink']['in']}; "
              f"errors so far {errs}", flush=True)

    result = run(args.seconds, args.seed, args.log, progress)
    result["loadavg"] = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if result["soak_conservation_errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
