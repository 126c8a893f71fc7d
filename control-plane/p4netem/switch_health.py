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
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families


class HealthUnavailable(RuntimeError):
    pass


@dataclass
class SwitchHealth:
    url: str                 # http://HOST:PORT/metrics of the switch
    timeout_s: float = 2.0
    _last: tuple[float, float] | None = field(default=None, repr=False)  # (uptime, busy) seen last

    def families(self) -> list[Metric]:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as r:
                text = r.read().decode()
        except (OSError, ValueError) as exc:  # ValueError: not an http(s) URL
            raise HealthUnavailable(f"switch metrics at {self.url}: {exc}") from None
        try:
            return list(text_string_to_metric_families(text))
        except ValueError as exc:  # another server's page: not the switch's --metrics-addr
            raise HealthUnavailable(f"switch metrics at {self.url}: not OpenMetrics text ({exc})") from None

    def summary(self) -> dict:
        """Busy fraction since the previous summary (or since the start), ring drops per port,
        buffers, P4Runtime latency per RPC (count, mean, and the bucket bounds of p50/p99), and
        whether the data plane runs (each thread's heartbeat age against the switch's timeout)."""
        fams = {f.name: f for f in self.families()}

        def value(name: str) -> float:
            return fams[name].samples[0].value if name in fams and fams[name].samples else 0.0

        uptime, busy = value("p4netem_switch_uptime_seconds"), value("p4netem_switch_dataplane_busy_seconds")
        since = self._last if self._last and self._last[0] < uptime else (0.0, 0.0)
        self._last = (uptime, busy)
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
            "dataplane_busy_fraction": round((busy - since[1]) / (uptime - since[0]), 4) if uptime > since[0] else None,
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
