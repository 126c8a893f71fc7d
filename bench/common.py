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
         tx_stamps: bool = False):
    """Run the paced UDP sender in ``host``. Returns its JSON summary, or the Popen when
    ``background`` (the caller then calls ``finish(proc)``). With ``dst_count`` N, datagram i goes
    to ``dst`` + i % N. With ``tx_stamps`` the summary has the kernel transmit timestamps
    (``tx_kernel``, see traffic.py); ``one_way_ns`` uses them."""
    cmd = topo.netns(host, PY, TRAFFIC, "send", "--dst", dst, "--port", str(port),
                     "--rate-bps", str(rate_bps), "--size", str(size),
                     "--count", str(count), "--duration", str(duration), "--dst-count", str(dst_count))
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
