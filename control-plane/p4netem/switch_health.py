"""The switch's own health, as p4netem-switch serves it on `--metrics-addr` (dataplane/src/health.rs:
data-plane loop busy time, kernel ring drops and packet I/O path (AF_XDP or AF_PACKET) per port, the
kernel fast path's state and hits, packet buffers, delay-line occupancy,
P4Runtime request latency per RPC, each data-plane thread's heartbeat), read by
`p4netem web --switch-metrics URL` for its /metrics
(the families re-exported as they are) and /api/health (a summary in JSON), and by
`p4netem stats --switch-metrics URL` (each port's kernel receive-ring frames and drops, and
whether the data plane runs).

P4Runtime has no place for a target's own health (gNMI would be the standard for it, which the
switch does not speak), so the switch serves it the way exporters do, and the web server reads it
like a Prometheus scrape, with prometheus_client's OpenMetrics parser.

The busy fraction of /api/health is over a fixed trailing window (BUSY_WINDOW_S), from readings of
the switch's two counters (uptime, busy time) that every read of its metrics leaves behind
(BusyWindow): it was "since the previous call", whoever made it, so a curl right after the
dashboard's 2 s poll got the fraction of a 0.1 s sliver, and two scripts polling changed each
other's figure.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families


class HealthUnavailable(RuntimeError):
    pass


# The busy fraction's window: the last 10 s. Long enough to hold five of the dashboard's 2 s polls
# and to smooth the loop's bursts (a busy turn is counted when it ends), short enough that a load
# that starts or stops shows within seconds, as in top. The figure is exact over whatever span it
# states (the switch's own counters at two readings), so the window is only a choice of scale.
BUSY_WINDOW_S = 10.0


@dataclass
class BusyWindow:
    """The data-plane loop's busy fraction over the last `window_s` seconds, the same for every
    caller: from the readings of (uptime, busy time) that any read of the switch's metrics leaves
    (each /api/health, each /metrics scrape of `p4netem web`), the reference is the newest reading
    at least `window_s` before the current one, or the switch's start (0, 0) when there is none (a
    switch younger than the window; the first read since the web server started). The span used
    is therefore the window or a little more (up to the gap between readings; since the start for
    a first read), and the answer states it. History: at most `keep` readings at least
    window_s / 20 apart, which covers 3x the window whatever the rate of calls."""

    window_s: float = BUSY_WINDOW_S
    keep: int = 64
    # (earliest, latest switch start on our clock, uptime, busy), oldest first
    _readings: deque = field(default_factory=deque, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # The switch computed its uptime between our request and its answer, so its start on our
    # monotonic clock lies in [sent - uptime, received - uptime], however slow the read: two readings
    # of one switch process agree on it (give or take this, for a remote switch's clock rate and
    # rounding), and one that does not is another process (restarted, or another switch at the
    # URL), whose history starts anew.
    RESTART_SLACK_S = 0.5

    def observe(self, uptime: float, busy: float, sent: float, received: float | None = None
                ) -> tuple[float | None, float]:
        """Records a reading of the switch's counters, requested at `sent` and answered at
        `received` (time.monotonic(); the same when not given), and answers (fraction in [0, 1],
        or None for a switch of uptime 0; the span in seconds) for it."""
        lo, hi = sent - uptime, (sent if received is None else received) - uptime
        with self._lock:
            if self._readings:
                lo0, hi0, u0, b0 = self._readings[-1]
                other_start = lo > hi0 + self.RESTART_SLACK_S or hi < lo0 - self.RESTART_SLACK_S
                if other_start or (uptime >= u0 and busy < b0):  # or its counters went back
                    self._readings.clear()
            # Concurrent reads can arrive out of order: only a newer one is kept, at the end.
            if not self._readings or uptime >= self._readings[-1][2] + self.window_s / 20:
                self._readings.append((lo, hi, uptime, busy))
                while len(self._readings) > self.keep:
                    self._readings.popleft()
            ref_u, ref_b = 0.0, 0.0
            for _, _, u, b in reversed(self._readings):
                if u <= uptime - self.window_s and b <= busy:
                    ref_u, ref_b = u, b
                    break
        span = uptime - ref_u
        if span <= 0:
            return None, 0.0
        return round(min(1.0, max(0.0, (busy - ref_b) / span)), 4), round(span, 3)


@dataclass
class SwitchHealth:
    url: str                 # http://HOST:PORT/metrics of the switch
    timeout_s: float = 2.0
    busy: BusyWindow = field(default_factory=BusyWindow, repr=False)

    def families(self) -> list[Metric]:
        """The switch's metric families. Each read also leaves its (uptime, busy) in `busy`, so
        the web's /metrics scrapes feed the busy fraction's window as /api/health calls do."""
        return self._read()[0]

    def _read(self) -> tuple[list[Metric], tuple[float | None, float]]:
        """The families, and the busy fraction and its span at this read (BusyWindow.observe)."""
        sent = time.monotonic()
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as r:
                text = r.read().decode()
        except (OSError, ValueError) as exc:  # ValueError: not an http(s) URL
            raise HealthUnavailable(f"switch metrics at {self.url}: {exc}") from None
        received = time.monotonic()
        try:
            fams = list(text_string_to_metric_families(text))
        except ValueError as exc:  # another server's page: not the switch's --metrics-addr
            raise HealthUnavailable(f"switch metrics at {self.url}: not OpenMetrics text ({exc})") from None
        by_name = {f.name: f for f in fams}
        return fams, self.busy.observe(_first(by_name, "p4netem_switch_uptime_seconds"),
                                       _first(by_name, "p4netem_switch_dataplane_busy_seconds"), sent, received)

    def summary(self) -> dict:
        """Busy fraction over the last BUSY_WINDOW_S (BusyWindow; the span used in
        `dataplane_busy_window_s`), ring drops per port, buffers, P4Runtime latency per RPC
        (count, mean, and the bucket bounds of p50/p99), and whether the data plane runs (each
        thread's heartbeat age against the switch's timeout)."""
        fams_list, (busy_fraction, busy_window_s) = self._read()
        fams = {f.name: f for f in fams_list}

        def value(name: str) -> float:
            return _first(fams, name)

        uptime, busy = value("p4netem_switch_uptime_seconds"), value("p4netem_switch_dataplane_busy_seconds")
        ports: dict[str, dict] = {}
        for name, key in (("p4netem_switch_kernel_rx_packets", "kernel_rx"), ("p4netem_switch_ring_drops", "ring_drops")):
            for s in fams[name].samples if name in fams else []:
                if s.name.endswith("_total"):
                    p = ports.setdefault(s.labels["port"], {"port": int(s.labels["port"]), "iface": s.labels["iface"]})
                    p[key] = int(s.value)
        # Each port's packet path (issue 14): "af_xdp", or "af_packet" when the switch fell back.
        for s in fams["p4netem_switch_port_io"].samples if "p4netem_switch_port_io" in fams else []:
            if s.value == 1 and s.labels["port"] in ports:
                ports[s.labels["port"]]["io"] = s.labels["io"]
        # Whether each port's interface is there and up (a switch older than the gauge: absent).
        for s in fams["p4netem_switch_port_up"].samples if "p4netem_switch_port_up" in fams else []:
            if s.labels["port"] in ports:
                ports[s.labels["port"]]["up"] = s.value == 1
        # The kernel fast path (issue 14): "on", or "off: why"; and what it forwarded.
        fast_state = next((s.labels["state"] for s in fams["p4netem_switch_fast_path"].samples if s.value == 1),
                          None) if "p4netem_switch_fast_path" in fams else None
        return {
            "fast_path": {"state": fast_state, "packets": int(value("p4netem_switch_fast_path_packets")),
                          "bytes": int(value("p4netem_switch_fast_path_bytes")),
                          "installs": int(value("p4netem_switch_fast_path_installs"))},
            "uptime_s": round(uptime, 3),
            "dataplane_busy_fraction": busy_fraction,
            "dataplane_busy_window_s": busy_window_s,
            "dataplane_busy_s": round(busy, 6),
            "held_packets": int(value("p4netem_switch_held_packets")),
            "free_buffers": int(value("p4netem_switch_free_buffers")),
            "buffers": int(value("p4netem_switch_buffers")),
            # The switch's release slack for backlogged rate queues (docs/dataplane.md): the
            # setting under which its rates and release times are what they are.
            "release_slack_us": round(value("p4netem_switch_release_slack_seconds") * 1e6, 3),
            # auto: the slack applies only to links fast enough to batch (a switch older than the
            # gauge: None).
            "release_slack_auto": (bool(fams["p4netem_switch_release_slack_auto"].samples[0].value)
                                   if "p4netem_switch_release_slack_auto" in fams else None),
            # The CPU wake-up latency the switch holds (--cpu-latency-us; None: none held), on which
            # its release times and P4Runtime round trips depend (docs/dataplane.md).
            "cpu_latency_us": (round(fams["p4netem_switch_cpu_latency_request_seconds"].samples[0].value * 1e6, 3)
                               if "p4netem_switch_cpu_latency_request_seconds" in fams else None),
            "ports": sorted(ports.values(), key=lambda p: p["port"]),
            "p4runtime": _latency(fams.get("p4netem_switch_p4runtime_request_seconds")),
            "dataplane": _liveness(fams),
            "read_at": time.time(),
        }


def _first(fams: dict[str, Metric], name: str) -> float:
    """The first sample of family `name` (0 when the switch does not serve it)."""
    return fams[name].samples[0].value if name in fams and fams[name].samples else 0.0


def _liveness(fams: dict[str, Metric]) -> dict:
    """Whether the data plane runs: each data-plane thread's heartbeat age and the switch's
    timeout, judged as the switch judges them for its gRPC health service (dataplane/src/health.rs
    `stalest`: a thread whose heartbeat is older than the timeout is stalled; equal is fresh).
    `serving` None: a switch older than the heartbeats (no such metrics), nothing known."""
    ages = fams.get("p4netem_switch_heartbeat_age_seconds")
    timeout = fams.get("p4netem_switch_heartbeat_timeout_seconds")
    if ages is None or not ages.samples or timeout is None or not timeout.samples:
        return {"serving": None, "timeout_s": None, "threads": [], "stalled": []}
    timeout_s = timeout.samples[0].value
    threads = []
    for s in ages.samples:
        t: dict = {"thread": s.labels.get("thread", "")}
        if "port" in s.labels:
            t.update(port=int(s.labels["port"]), iface=s.labels.get("iface"))
        t["age_s"] = round(s.value, 3)
        threads.append((s.value, t))
    stalled = [t for age, t in threads if age > timeout_s]
    return {"serving": not stalled, "timeout_s": timeout_s, "threads": [t for _, t in threads],
            "stalled": stalled}


def stall_message(dataplane: dict) -> str | None:
    """One line on a stalled data plane (a summary's "dataplane"), as the switch logs it; None
    while it runs, or when a switch without heartbeats cannot tell."""
    if dataplane["serving"] is not False:
        return None
    threads = "; ".join(f"{_thread_name(t)} has not run for {t['age_s']:.1f} s" for t in dataplane["stalled"])
    return f"data plane stalled: {threads} (the switch's --heartbeat-timeout-ms: {dataplane['timeout_s']:g} s)"


def _thread_name(t: dict) -> str:
    if "port" in t:
        return f"the TX thread of port {t['port']} ({t['iface']})"
    return "the data-plane loop" if t["thread"] == "dataplane" else f"the {t['thread']} thread"


def _latency(fam: Metric | None) -> dict:
    """Per RPC: requests, mean time, and the upper bounds of the buckets holding p50 and p99."""
    if fam is None:
        return {}
    out: dict[str, dict] = {}
    by_rpc: dict[str, dict] = {}
    for s in fam.samples:
        d = by_rpc.setdefault(s.labels["rpc"], {"buckets": []})
        if s.name.endswith("_bucket"):
            d["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            d["count"] = int(s.value)
        elif s.name.endswith("_sum"):
            d["sum"] = s.value
    for rpc, d in sorted(by_rpc.items()):
        n = d.get("count", 0)
        buckets = sorted(d["buckets"])

        def quantile_bound(q: float) -> float | None:
            for le, cum in buckets:
                if n and cum >= q * n:
                    return le if le != float("inf") else None
            return None

        out[rpc] = {"requests": n, "mean_ms": round(d.get("sum", 0.0) / n * 1e3, 3) if n else None,
                    "p50_le_ms": _ms(quantile_bound(0.5)), "p99_le_ms": _ms(quantile_bound(0.99))}
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 3)
