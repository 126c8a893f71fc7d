"""Helpers shared by the measurements: running the traffic tools in a host namespace, statistics."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from topo import Host, Topo

BENCH_DIR = Path(__file__).resolve().parent
TRAFFIC = str(BENCH_DIR / "traffic.py")
PY = sys.executable
PKTGEN = BENCH_DIR.parent / "dataplane" / "target" / "release" / "p4netem-pktgen"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))
    return s[k]


@contextmanager
def sink(topo: Topo, host: Host, port: int, idle: float = 1.0, timeout: float = 120.0):
    """Start a traffic sink in ``host`` and yield a callable that waits for it and returns its
    per-datagram records (a dict of equal-length lists: seq, tx_ns, rx_ns, frame_bytes)."""
    fd, out = tempfile.mkstemp(prefix="p4nb-sink-", suffix=".json")
    os.close(fd)
    cmd = topo.netns(host, PY, TRAFFIC, "sink", "--port", str(port), "--out", out,
                     "--idle", str(idle), "--timeout", str(timeout))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"sink did not start: {line!r} {proc.stderr.read()}")

        def collect() -> dict:
            proc.wait(timeout=timeout + 10)
            if proc.returncode != 0:
                raise RuntimeError(f"sink failed: {proc.stderr.read()}")
            with open(out) as f:
                return json.load(f)

        yield collect
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=5)
        os.unlink(out)


def send(topo: Topo, host: Host, dst: str, port: int, rate_bps: float, size: int,
         count: int = 0, duration: float = 0.0, background: bool = False, dst_count: int = 1,
         tx_stamps: bool = False, tos: int = 0):
    """Run the paced UDP sender in ``host``. Returns its JSON summary, or the Popen when
    ``background`` (the caller then calls ``finish(proc)``). With ``dst_count`` N, datagram i goes
    to ``dst`` + i % N. With ``tx_stamps`` the summary has the kernel transmit timestamps
    (``tx_kernel``, see traffic.py); ``one_way_ns`` uses them. ``tos`` is the datagrams' IP TOS
    byte, ECN bits included."""
    cmd = topo.netns(host, PY, TRAFFIC, "send", "--dst", dst, "--port", str(port),
                     "--rate-bps", str(rate_bps), "--size", str(size),
                     "--count", str(count), "--duration", str(duration), "--dst-count", str(dst_count),
                     "--tos", str(tos))
    if tx_stamps:
        cmd.append("--tx-stamps")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc if background else finish(proc)


def one_way_ns(rec: dict, sent: dict) -> tuple[dict[int, int], int]:
    """One-way delay per sequence number: the sink's kernel receive stamp minus the sender's kernel
    transmit stamp (``sent["tx_kernel"]``), or minus the send time the datagram carries when the
    kernel gave no stamp for it. Returns the delays and how many fell back to the carried time."""
    kernel = dict(zip(sent.get("tx_kernel", {}).get("seq", []),
                      sent.get("tx_kernel", {}).get("tx_ns", [])))
    out, fallback = {}, 0
    for seq, tx, rx in zip(rec["seq"], rec["tx_ns"], rec["rx_ns"]):
        k = kernel.get(seq)
        if k is None:
            fallback += 1
        out[seq] = rx - (k if k is not None else tx)
    return out, fallback


def finish(proc: subprocess.Popen, timeout: float = 120.0) -> dict:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"sender failed: {err}")
    return json.loads(out)


def iperf3_tcp(topo: Topo, client: Host, server: Host, seconds: int, streams: int = 1) -> dict:
    """iperf3 TCP ``client`` -> ``server``; returns receiver-side Gbit/s and retransmits."""
    srv = subprocess.Popen(topo.netns(server, "iperf3", "-s", "-1", "-p", "5201"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        r = subprocess.run(topo.netns(client, "iperf3", "-c", server.ip, "-p", "5201",
                                      "-t", str(seconds), "-P", str(streams), "-J"),
                           capture_output=True, text=True, timeout=seconds + 30)
        d = json.loads(r.stdout)
        if "error" in d:
            raise RuntimeError(f"iperf3: {d['error']}")
        end = d["end"]
        return {"gbit_s": end["sum_received"]["bits_per_second"] / 1e9,
                "retransmits": end["sum_sent"].get("retransmits"),
                "seconds": seconds, "streams": streams}
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def pktgen_cmd(topo: Topo, host: Host, dst_ip: str, dst_mac: str, *, size: int, dst_count: int = 1,
               duration: float = 0.0, count: int = 0, rate_pps: float = 0.0, first: int = 0,
               stride: int = 1) -> list[str]:
    """The command running p4netem-pktgen (dataplane/src/bin: UDP frames of ``size`` Ethernet bytes
    written into an AF_PACKET TX ring) in ``host``; it prints one JSON line (sent, seconds, pps).
    Packet i goes to ``dst_ip + ((first + i) * stride) % dst_count``."""
    if not PKTGEN.exists():
        raise RuntimeError(f"{PKTGEN} is missing: build the dataplane crate (make build)")
    return topo.netns(host, str(PKTGEN), "--iface", host.dev, "--src-mac", host.mac, "--dst-mac", dst_mac,
                      "--src-ip", host.ip, "--dst-ip", dst_ip, "--dst-count", str(dst_count),
                      "--size", str(size), "--duration", str(duration), "--count", str(count),
                      "--rate", str(rate_pps), "--first", str(first), "--stride", str(stride))


def pktgen(topo: Topo, host: Host, dst_ip: str, dst_mac: str, **kw) -> dict:
    """Runs p4netem-pktgen to the end (see pktgen_cmd) and returns its JSON summary."""
    cmd = pktgen_cmd(topo, host, dst_ip, dst_mac, **kw)
    limit = kw.get("duration", 0.0) + kw.get("count", 0) / 10_000 + 60
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    if r.returncode != 0:
        raise RuntimeError(f"p4netem-pktgen failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def _thread_dirs(pid: int, named):
    """The /proc directories of the threads of `pid` whose name satisfies `named` (OSError if the
    process or a thread goes away while read)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        d = f"/proc/{pid}/task/{task}"
        if named(open(f"{d}/comm").read().strip()):
            yield d


def _threads_cpu_ns(pid: int, named) -> float | None:
    """Summed CPU time (ns, scheduler accounting) of the threads of `pid` whose name satisfies
    `named`; None if the kernel does not expose per-thread figures."""
    total = 0.0
    try:
        for d in _thread_dirs(pid, named):
            for line in open(f"{d}/sched"):
                if line.startswith("se.sum_exec_runtime"):
                    total += float(line.split(":")[1]) * 1e6
    except OSError:
        return None
    return total


def dp_cpu_ns(pid: int) -> float:
    """CPU time of the switch's data-plane thread (`p4netem-dp`), ns (scheduler accounting, exact
    to the ns); the whole process's CPU clock if the kernel does not expose per-thread figures."""
    ns = _threads_cpu_ns(pid, lambda name: name == "p4netem-dp")
    if ns:
        return ns
    return float(time.clock_gettime_ns(((~pid) << 3) | 2))  # CPUCLOCK_SCHED of the process


def dp_run_delay_ns(pid: int) -> int | None:
    """How long the switch's data-plane thread has waited runnable but not run, ns (`run_delay`,
    the second field of its schedstat). The thread is SCHED_FIFO, which no ordinary thread makes
    wait, so this is time the kernel held its CPU after waking it (softirq work, a kernel or
    real-time thread: 4-31 ms per probe run here) or the kernel's RT throttling stopped it (tens
    of ms at a time: docs/dataplane.md "The spin budget"); a vCPU the hypervisor does not run
    (steal) does not count. None if the kernel does not expose it."""
    try:
        for d in _thread_dirs(pid, lambda name: name == "p4netem-dp"):
            return int(open(f"{d}/schedstat").read().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def softirq_threads_cpu_ns() -> float:
    """Summed CPU time (ns) of the kernel's per-CPU softirq threads (`ksoftirqd/N`). Softirq work
    runs in whatever thread raised it (on a veth, the sender's transmit syscall) until it takes too
    long; then the rest is deferred to these threads, off the sender's accounting."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if open(f"/proc/{pid}/comm").read().startswith("ksoftirqd/"):
                total += float(open(f"/proc/{pid}/schedstat").read().split()[0])
        except OSError:
            continue
    return total


def tx_threads_cpu_ns(pid: int) -> float:
    """CPU time of the switch's per-port TX threads (`p4netem-tx-*`, `--tx-threads true`), ns; 0
    without them. On a veth they run the kernel's transmit path, the receivers' stacks included."""
    return _threads_cpu_ns(pid, lambda name: name.startswith("p4netem-tx-")) or 0.0


def link_counters(dev: str) -> tuple[int, dict[str, int]]:
    """(CLOCK_MONOTONIC ns, the kernel's byte/packet counters of a root-namespace interface). The
    time is the middle of the reads; reads that took over 50 us (descheduled) are retried."""
    names = ("tx_bytes", "tx_packets", "rx_bytes", "rx_packets", "tx_dropped", "rx_dropped")
    base = f"/sys/class/net/{dev}/statistics/"
    for _ in range(20):
        t0 = time.monotonic_ns()
        vals = {n: int(open(base + n).read()) for n in names}
        t1 = time.monotonic_ns()
        if t1 - t0 < 50_000:
            break
    return (t0 + t1) // 2, vals


def loss_sequence(topo: Topo, ctl, params: dict[str, int], port: int, count: int, pps: int,
                  frame: int) -> list[bool]:
    """Per datagram, lost or not: `count` numbered `frame`-byte datagrams at `pps` from h1 to h2
    through profile 1 uplink set to `params`, which is cleared afterwards. Raises if the sender's
    kernel refused any: the sequence would then not be the switch's."""
    return loss_run(topo, ctl, params, port, count, pps, frame)[0]


def loss_run(topo: Topo, ctl, params: dict[str, int], port: int, count: int, pps: int,
             frame: int) -> tuple[list[bool], dict]:
    """`loss_sequence` and the sink's records of the datagrams that arrived (seq, tx_ns, rx_ns)."""
    ctl.set_impairment(1, 0, **params)
    try:
        with sink(topo, topo.h2, port, idle=1.0) as done:
            sent = send(topo, topo.h1, topo.h2.ip, port, pps * frame * 8, frame, count=count)
            rec = done()
    finally:
        ctl.set_impairment(1, 0)
    if sent["send_errors"]:
        raise RuntimeError(f"the sender's kernel refused {sent['send_errors']} datagrams: the loss "
                           "sequence would not be the switch's")
    got = set(rec["seq"])
    return [i not in got for i in range(sent["sent"])], rec

