"""`make bench`: measures p4netem-switch against its bars in one run and writes bench/results/latest.json.

Every figure is a ratio or an error against a baseline taken in the same run, on the same veths with
the same offload settings: a Linux bridge for throughput, the switch itself with delay 0 for delay, the
configured value for rate and loss. Needs root (namespaces, veths, AF_PACKET).

The table also shows the design targets (/work/shared/DESIGN.md "Performance and accuracy goals":
what is reached and what is next, some tighter than the issue bars, some on figures with no issue bar)
and whether each was met; `--strict` fails on the issue bars only.

usage: .venv/bin/python bench/run.py [--only NAME,...] [--out PATH] [--strict]
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aqm  # noqa: E402
import bearers  # noqa: E402
import control  # noqa: E402
import dashboard  # noqa: E402
import full_tables  # noqa: E402
import hoststats  # noqa: E402
import io_paths  # noqa: E402
import delay  # noqa: E402
import endpoints  # noqa: E402
import ge  # noqa: E402
import loss4  # noqa: E402
import onoff  # noqa: E402
import netem_corr  # noqa: E402
import loss  # noqa: E402
import p4rt_writes  # noqa: E402
import pie  # noqa: E402
import radio  # noqa: E402
import slot  # noqa: E402
import trace_aqm  # noqa: E402
import trace_delivery  # noqa: E402
import rate  # noqa: E402
import throughput  # noqa: E402
import timeline  # noqa: E402
import topo as topology  # noqa: E402
from p4netem.lab import SwitchProcess, unique_token  # noqa: E402
from p4netem.paths import switch_binary  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "latest.json"
CLASSIFIER_CAPACITY = 65536  # the switch's default --classifier-entries
MEASUREMENTS = ("throughput", "delay", "rate", "loss", "ge", "loss4", "onoff", "netem_corr", "netem_ecn", "slot", "trace", "aqm", "pie", "trace_aqm", "bearers", "p4rt", "radio",
                "timeline", "endpoints", "dashboard", "io_paths")

# (key, bar, comparison, unit, what)
BARS = (
    ("throughput_ratio_vs_bridge", 1.0, ">=", "", f"TCP throughput / Linux bridge, median of {throughput.ROUNDS} paired runs (issue 14; kernel fast path on, "
     "the default; off: throughput_ratio_vs_bridge_fast_path_off)"),
    ("delay_error_us_p99", 20.0, "<=", "us", "added-delay error p99 (50 ms, 50 Mbit/s load; issue 14: stays <= 20 us)"),
    ("rate_error_pct_max", 2.0, "<=", "%", "worst rate error, 64k..100 Mbit/s"),
    ("rate_cells_error_pct", 2.0, "<=", "%", "netem's cells (rate 1mbit 0 48 5, ATM): 500-byte frames' goodput "
     "vs the rate's share of 11 cells of 53 bytes"),
    ("loss_error_sigma", 3.0, "<=", "sigma", "loss error at 1%, 1e5 packets"),
    ("loss4_error_sigma", 3.0, "<=", "sigma", "netem 4-state loss (loss state 2% 40% 20% 50% 1%): loss rate and "
     "mean burst vs theory, worse of the two, 2e5 packets"),
    ("onoff_error_sigma", 3.0, "<=", "sigma", "on/off link (mm-onoff, mean on 10 ms, off 2.5 ms): off share, mean "
     "off and on runs vs the sampled chain's theory, worst of the three, 3e5 packets"),
    ("netem_corr_error_sigma", 3.0, "<=", "sigma", "netem's correlated loss (loss 25% 50%): loss rate and mean "
     "burst vs netem's arithmetic simulated (20 runs), worse of the two, 2e5 packets"),
    ("netem_ecn_mark_error_sigma", 3.0, "<=", "sigma", "netem's ecn (loss 1% ecn, ECT(0) datagrams): CE marks seen "
     "on the wire vs the loss rate, 1e5 packets"),
    ("netem_ecn_switch_drops", 0.0, "<=", "", "loss drops of the same ECT(0) datagrams (every loss must be a mark)"),
    ("trace_delivery_ratio", 0.995, ">=", "", "exact trace delivery: frames delivered / opportunities in one "
     "period of examples/traces/walk-cellular.trace, saturating flow"),
    ("slot_error_us_p99", 50.0, "<=", "us", "netem slots (slot 5ms packets 4, 2x backlog): release times against "
     "the slot grid, 4000 packets"),
    ("codel_sojourn_ms_p50", 7.0, "<=", "ms", "CoDel sojourn p50 (5 +/- 2 ms; tail drop: taildrop_sojourn_ms_p50), "
     "CUBIC TCP + short flows, 10 Mbit/s, 1000 pkt: median of 5 rounds' p50 (range: _min/_max; "
     "Reno: codel_sojourn_ms_p50_reno)"),
    ("codel_sojourn_ms_p50_low", 3.0, ">=", "ms", "the same figure, lower edge of 5 +/- 2 ms"),
    ("ecn_aqm_drops", 0.0, "<=", "", "AQM drops of an ECN TCP flow through CoDel (its marks: ecn_marks)"),
    ("red_sojourn_ms_p50", 72.0, "<=", "ms", "RED sojourn p50, same flows: below max's 72 ms "
     "(min 30 KB, max 90 KB, max_p 10 %; tail drop: taildrop_sojourn_ms_p50)"),
    ("gentle_red_sojourn_ms_p50", 144.0, "<=", "ms", "gentle RED sojourn p50: below 2 max's 144 ms"),
    ("pie_qdelay_ms_p50", 20.0, "<=", "ms", "PIE (Linux's defaults) under a constant 2x UDP overload, 1500-byte "
     "frames, 10 Mbit/s, 1000 pkt: median one-way delay after 3 s (15 +/- 5 ms target; the contract's model on the "
     "same send times: pie_qdelay_ms_p50_model; tail drop: taildrop_qdelay_ms_p50)"),
    ("pie_qdelay_ms_p50_low", 10.0, ">=", "ms", "the same figure, lower edge of 15 +/- 5 ms"),
    ("pie_udp_queue_full_drops", 0.0, "<=", "", "drops at the queue's limit in that overload (every drop PIE's)"),
    ("bearer_fairness_pct_err", 2.0, "<=", "pp", "two backlogged UEs (1514- and 514-byte frames) on one 10 Mbit/s "
     "cell with DRR bearers: worse |byte share - 50 %| (theory 0: 50 % each)"),
    ("bearer_alone_pct", 98.0, ">=", "%", "one backlogged UE alone on that cell: its rate / 10 Mbit/s (theory 100 %)"),
    ("throughput_ratio_full_tables", 0.9, ">=", "", "TCP throughput, 64k ternary classifier entries / empty table (median of paired runs)"),
    ("p4rt_writes_per_s", 100_000.0, ">=", "/s", "classifier inserts filling the 64k table, batches of 500, "
     "tonic client (the Python client's: p4rt_writes_per_s_python)"),
    ("p4rt_modify_rtt_ms_p99", 1.0, "<=", "ms", "one-entry classifier MODIFY round trip, 64k entries, client "
     "SCHED_FIFO 4 as the timeline player (normal priority: p4rt_modify_rtt_ms_p99_normal)"),
    ("rate_1g_dataplane_busy_pct", 60.0, "<=", "%", "data-plane thread busy, 1 Gbit/s shaping, 2x overload, the "
     "switch's defaults (release slack auto: rate_1g_release_slack_us for links that serve 32 frames within it, "
     "1 Gbit/s among them; with TX threads too, --tx-threads true --release-slack-us 500, on a fresh switch: "
     "rate_1g_dataplane_busy_pct_gigabit, its TX threads rate_1g_tx_threads_busy_pct_gigabit)"),
    ("rrc_promotion_error_us_p99", 1000.0, "<=", "us", "first packet after idle vs promotion (100 ms)"),
    ("rrc_throughput_ratio_100k_ue", 0.9, ">=", "", "switch pps, 100k awake UEs / 1 UE (median of per-round ratios)"),
    ("rrc_throughput_ratio_1m_ue", 0.95, ">=", "", "switch pps, 1M awake UEs, scattered / 1 UE (issue 14; same)"),
    ("timeline_step_error_ms_p99", 5.0, "<=", "ms", "timeline change in force after its time, p99"),
    ("h2c_vs_h1_plt_ratio", 1.05, "<=", "", "plain HTTP/2 / HTTP/1.1 PLT, lte-200ms, e5-site1, 2 origins"),
    ("spdy_plain_vs_h1_plt_ratio", 1.05, "<=", "", "plain SPDY / HTTP/1.1 PLT, same"),
    ("tls_h2_vs_h1_plt_ratio", 1.05, "<=", "", "HTTP/2 / HTTP/1.1 PLT over TLS, same"),
    ("dashboard_throughput_cost_pct", 2.0, "<=", "%", "TCP throughput lost to p4netem web + /metrics, 1 s, 1000 rules"),
)

# The design's targets: (key, target, comparison, unit, what). Reported as met/missed, never a
# failure of the run. Keys without an issue bar get rows of their own in the table.
DESIGN = (
    ("throughput_ratio_vs_bridge", 1.0, ">=", "", ""),
    ("delay_error_us_p99", 10.0, "<=", "us", ""),
    ("rate_error_pct_max_20k_1g", 0.1, "<=", "%", "worst rate error, 20 kbit/s..1 Gbit/s"),
    ("loss_error_sigma", 3.0, "<=", "sigma", ""),
    ("ge_loss_error_pct", 5.0, "<=", "%", "Gilbert-Elliott loss vs theory (see SE)"),
    ("ge_burst_error_pct", 5.0, "<=", "%", "Gilbert-Elliott mean burst vs theory (see SE)"),
    ("ge_gap_error_pct", 5.0, "<=", "%", "Gilbert-Elliott mean gap vs theory (see SE)"),
    ("p4rt_writes_per_s", 100_000.0, ">=", "/s", ""),
    ("p4rt_modify_rtt_ms_p99", 1.0, "<=", "ms", ""),
    ("rrc_promotion_error_us_p99", 1000.0, "<=", "us", ""),
)


def environment() -> dict:
    def out(*cmd: str) -> str:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        return r.stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "")
    binary = switch_binary()
    build = {}
    if binary.exists():
        # The working tree can be ahead of the binary: identify the binary measured, not just HEAD.
        build = {"path": str(binary), "sha256": hashlib.sha256(binary.read_bytes()).hexdigest()[:16],
                 "mtime": datetime.datetime.fromtimestamp(binary.stat().st_mtime,
                                                          datetime.timezone.utc).isoformat(
                                                              timespec="seconds")}
    return {
        "switch_binary": build,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "git_commit": out("git", "rev-parse", "HEAD"),
        "git_dirty": bool(out("git", "status", "--porcelain", "--untracked-files=no")),
        "python": sys.version.split()[0],
        # Other load on this 2-core machine skews latency tails: recorded so a reader can tell.
        "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
        "iperf3": out("iperf3", "--version").splitlines()[0] if out("iperf3", "--version") else "",
    }


def passed(value, bar: float, cmp: str) -> bool | None:
    if not isinstance(value, (int, float)):
        return None
    return value >= bar if cmp == ">=" else value <= bar


def print_table(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"p4netem bench  {res['environment']['date']}  "
                    f"{res['environment']['git_commit'][:10]}  kernel {res['environment']['kernel']}")
    for col in ("figure", "measured", "bar", "", "design target", "", "what"):
        t.add_column(col)
    f = res["figures"]
    design = {k: (b, c, u, w) for k, b, c, u, w in DESIGN}

    def shown(key: str, unit: str) -> str:
        v = f.get(key)
        if not isinstance(v, (int, float)):
            return "-"
        se = f.get(key.replace("_error_pct", "_se_pct")) if key.startswith("ge_") else None
        # A GE figure is read against the standard error its run can resolve.
        return f"{v:.4g} {unit}" + (f" (SE {se:.2g} %)" if isinstance(se, (int, float)) else "")

    def design_cells(key: str) -> tuple[str, str]:
        if key not in design:
            return "", ""
        b, c, u, _ = design[key]
        ok = passed(f.get(key), b, c)
        return f"{c} {b:g} {u}", {True: "[green]met", False: "[red]missed", None: "[yellow]n/a"}[ok]

    for key, bar, cmp, unit, what in BARS:
        ok = passed(f.get(key), bar, cmp)
        mark = {True: "[green]PASS", False: "[red]MISS", None: "[yellow]n/a"}[ok]
        t.add_row(key, shown(key, unit), f"{cmp} {bar:g} {unit}", mark, *design_cells(key), what)
    bar_keys = {k for k, *_ in BARS}
    for key, _, _, unit, what in DESIGN:
        if key not in bar_keys:
            t.add_row(key, shown(key, unit), "", "", *design_cells(key), what)
    extra = [
        ("throughput_bridge_gbit_s", "Gbit/s"), ("throughput_switch_gbit_s", "Gbit/s"),
        ("throughput_ratio_vs_bridge_of_medians", ""), ("throughput_ratio_full_tables_of_medians", ""),
        ("delay_error_us_p50", "us"), ("delay_error_us_p99_heavy", "us"), ("delay_error_us_max_heavy", "us"),
        ("delay_baseline_us_p50", "us"), ("delay_baseline_us_p99", "us"),
        ("delay_reference_us_p50", "us"), ("delay_reference_us_p99", "us"),
        ("loss_measured", ""),
        ("codel_sojourn_ms_p50_min", "ms"), ("codel_sojourn_ms_p50_max", "ms"),
        ("codel_sojourn_ms_p50_pooled", "ms"), ("codel_reference_drop_agreement", ""),
        ("taildrop_sojourn_ms_p50", "ms"), ("codel_sojourn_ms_p50_reno", "ms"), ("codel_sojourn_ms_p50_4_flows", "ms"),
        ("taildrop_sojourn_ms_p50_reno", "ms"), ("trace_codel_sojourn_ms_p50", "ms"),
        ("pie_qdelay_ms_p10", "ms"), ("pie_qdelay_ms_p90", "ms"), ("pie_qdelay_ms_p50_model", "ms"),
        ("pie_udp_loss", ""), ("pie_prob_p50", ""), ("taildrop_qdelay_ms_p50", "ms"), ("pie_sojourn_ms_p50", "ms"),
        ("trace_taildrop_sojourn_ms_p50", "ms"), ("trace_codel_reference_drop_agreement", ""), ("trace_codel_reference_drop_agreement_ahead", ""), ("ecn_marks", ""), ("bearer_pf_fairness_pct_err", "pp"),
        ("rrc_promotion_error_us_p50", "us"), ("rrc_switch_mpps_1_ue", "Mpps"),
        ("rrc_switch_mpps_100k_ue", "Mpps"), ("rrc_throughput_ratio_1m_ue_of_medians", ""),
        ("timeline_step_error_ms_p50", "ms"), ("timeline_step_error_ms_max", "ms"),
        ("timeline_wire_error_ms_p50", "ms"), ("timeline_wire_error_ms_p99", "ms"),
        ("timeline_wire_error_ms_max", "ms"),
        ("rate_1g_release_slack_us", "us"), ("rate_1g_dataplane_busy_pct_gigabit", "%"),
        ("rate_1g_tx_threads_busy_pct_gigabit", "%"), ("rate_1g_error_pct_gigabit", "%"),
        ("throughput_ratio_vs_bridge_af_xdp", ""), ("rate_1g_dataplane_busy_pct_af_xdp", "%"),
        ("rate_1g_error_pct_af_xdp", "%"),
        ("throughput_ratio_vs_bridge_fast_path_off", ""), ("throughput_ratio_full_tables_fast_path_off", ""),
        ("reval_pipelined_packets_ratio", ""), ("reval_pipelined_packets_ratio_unbuffered", ""),
    ]
    for key, unit in extra:
        if isinstance(f.get(key), (int, float)):
            t.add_row(key, f"{f[key]:.4g} {unit}", "", "", "")
    for r, e in (f.get("rate_error_pct") or {}).items():
        t.add_row(f"rate_error_pct[{r}]", f"{e:.4g} %", "", "", "")
    console = Console(width=150)
    console.print(t)
    for p in res["config"].get("rate_config", {}).get("per_rate", []):
        if "paced_by" in p:
            # Whether the line-rate point measured the shaper or the switch's capacity: said, not hidden.
            console.print(f"rate {p['configured_bps']:g} bit/s: paced by {p['paced_by']}")
    ge_cfg = res["config"].get("ge_config")
    if ge_cfg and ge_cfg.get("lost_outside_switch"):
        console.print(f"[red]GE: {ge_cfg['lost_outside_switch']} datagrams lost outside the switch: the GE "
                      f"figures are not the switch's alone")
    env, host = res["environment"], res["config"].get("host_cpu", {})
    if "delay" in host:
        # The latency tail depends on what else runs on the machine: say so next to the figures.
        d = host["delay"]
        console.print(f"host during delay: CPUs {d['busy_pct_of_wall']}% busy (the bench's own load is "
                      f"~30%), steal {d['steal_pct_of_wall']}%; load average at start "
                      f"{env['loadavg_at_start'][0]}")
    tr = res["config"].get("delay_config", {}).get("trace")
    if tr:
        rng = tr["silent_stretch_ms"]
        console.print(f"delay, traced (--trace-sched): of {tr['late_at_least_silent_min']} probes at least "
                      f"{tr['silent_min_us']:g} us late, {tr['held_by_a_silent_cpu']} waited on a CPU that logged "
                      f"nothing (stretches {rng[0] if rng else '-'}-{rng[1] if rng else '-'} ms); "
                      f"{tr['late_below_silent_min']} more {tr['late_over_us']:g}-{tr['silent_min_us']:g} us late, "
                      f"not attributed; {tr['lost_events']} events lost")
    for name, err in res["errors"].items():
        console.print(f"[red]{name} failed:[/red] {err.splitlines()[-1]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(MEASUREMENTS),
                    help=f"comma-separated subset of {','.join(MEASUREMENTS)}")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a bar is missed")
    ap.add_argument("--cpu-latency-us", default=hoststats.CPU_LATENCY_US, type=hoststats.cpu_latency_arg,
                    metavar="US|off",
                    help="CPU wake-up latency (PM QoS) held for the whole run and by every switch the bench "
                         "starts (their --cpu-latency-us, through P4NETEM_SWITCH_CPU_LATENCY_US); default "
                         "%(default)s, the switch's own default")
    ap.add_argument("--trace-sched", action="store_true",
                    help="record every CPU's scheduler and softirq events (perf) during the delay step's "
                         "loaded run and say how many late probes waited on a CPU that ran nothing "
                         "(bench/sched_trace.py); adds load, so not for the figures of record")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if unknown := only - set(MEASUREMENTS):
        ap.error(f"unknown measurement(s): {', '.join(sorted(unknown))}")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces, veths, AF_PACKET)")

    os.environ["P4NETEM_SWITCH_CPU_LATENCY_US"] = "off" if args.cpu_latency_us is None else str(args.cpu_latency_us)
    with hoststats.CpuLatency(args.cpu_latency_us) as cpu_latency:
        return run(args, only, cpu_latency)


def run(args, only: set[str], cpu_latency: hoststats.CpuLatency) -> int:
    res: dict = {"environment": dict(environment(), cpu_latency=cpu_latency.describe(),
                                     trace_sched=args.trace_sched),
                 "figures": {}, "config": {}, "errors": {},
                 "bars": {k: f"{c} {b:g}" for k, b, c, _, _ in BARS},
                 "design_targets": {k: f"{c} {b:g}" for k, b, c, _, _ in DESIGN}}
    figures, errors = res["figures"], res["errors"]
    started = time.monotonic()

    def step(name: str, fn, label: str = "") -> None:
        if name not in only or name in errors:
            return
        t0 = time.monotonic()
        label = label or name
        print(f"== {label}", flush=True)
        cpu0 = hoststats.cpu_times()
        try:
            out = fn()
        except Exception:  # one failed measurement must not lose the others
            errors[name] = traceback.format_exc()
            print(errors[name], file=sys.stderr, flush=True)
            return
        for k, v in out.items():
            (res["config"] if k.endswith("_config") else figures)[k] = v
        wall = time.monotonic() - t0
        res["config"].setdefault("durations_s", {})[label] = round(wall, 1)
        res["config"].setdefault("host_cpu", {})[label] = hoststats.steal_between(
            cpu0, hoststats.cpu_times(), wall)

    t = topology.setup(topology.make(unique_token()))
    res["config"]["topology"] = {"h1": t.h1.ns, "h2": t.h2.ns, "switch_ports": list(t.ports)}
    try:
        @contextmanager
        def own_switch(name: str, extra: tuple[str, ...] = ()):
            """A switch of its own on the same veths (same run), started with `extra`, forwarding
            port 1 <-> 2 with no impairment: yields (its control, its SwitchProcess)."""
            with SwitchProcess({1: t.ports[0], 2: t.ports[1]}, seed=args.seed,
                               log_path=ROOT / "build" / f"bench-switch-{name}.log", extra_args=list(extra)) as one:
                c = control.Control(one.grpc_addr, one.device_id)
                c.start()
                try:
                    yield c, one
                finally:
                    c.close()

        # Bridge and switch in pairs, a fresh switch for each switch run (throughput.py).
        step("throughput", lambda: throughput.paired(t, lambda: own_switch("throughput")),
             label="throughput (bridge and switch, paired)")

        def on_second_switch(name: str, extra: list[str], step_name: str, label: str, fn) -> None:
            """One step on a switch of its own: fn(control, switch) gives the step's figures."""
            with own_switch(name, tuple(extra)) as (c, other):
                step(step_name, lambda: fn(c, other), label=label)

        sw = SwitchProcess({1: t.ports[0], 2: t.ports[1]}, seed=args.seed,
                           log_path=ROOT / "build" / "bench-switch.log")
        with sw:
            res["config"]["switch"] = {"cmd": " ".join(sw.command()), "log": str(sw.log_path)}
            ctl = control.Control(sw.grpc_addr, sw.device_id)
            ctl.start()
            try:
                if "throughput_switch_gbit_s" in figures:
                    step("throughput", lambda: full_tables.measure(t, ctl, figures["throughput_switch_gbit_s"],
                                                                   CLASSIFIER_CAPACITY),
                         label="throughput (full tables)")
                ctl.classify_by_ingress_port()
                step("delay", lambda: delay.measure(t, ctl, sw.proc.pid, trace_sched=args.trace_sched))
                step("rate", lambda: rate.measure(t, ctl, sw.proc.pid, rate.release_slack_us(sw.log_path)))
                step("loss", lambda: loss.measure(t, ctl))
                step("ge", lambda: ge.measure_ge(t, ctl))
                step("loss4", lambda: loss4.measure_loss4(t, ctl))
                step("onoff", lambda: onoff.measure_onoff(t, ctl))
                step("netem_corr", lambda: netem_corr.measure_netem_corr(t, ctl))
                step("netem_ecn", lambda: loss.measure_ecn(t, ctl))
                step("slot", lambda: slot.measure(t, ctl))
                step("trace", lambda: trace_delivery.measure(t, ctl))
                step("aqm", lambda: aqm.measure(t, ctl))
                step("pie", lambda: pie.measure(t, ctl))
                step("trace_aqm", lambda: trace_aqm.measure(t, ctl))
                step("bearers", lambda: bearers.measure(t, ctl))
                step("p4rt", lambda: p4rt_writes.measure(ctl, CLASSIFIER_CAPACITY))
                step("radio", lambda: radio.promotion_accuracy(t, ctl), label="radio (promotion)")
                # Last: its controller takes the primary role from the bench's own client.
                step("timeline", lambda: timeline.measure(t, sw.grpc_addr, sw.device_id))
            finally:
                ctl.close()
        res["config"]["switch_io"] = io_paths.ports_io(sw.log_path)  # its "port up" lines
        if "throughput" in only and "throughput_bridge_gbit_s" in figures:
            # Issue 14: the switch above runs with its kernel fast path (--fast-path auto, the
            # default); the same two throughput figures with it off, in the same run, on the same
            # veths: every packet through the data-plane thread (and the classifier).
            on_second_switch("fast-path-off", ["--fast-path", "off"], "throughput", "throughput (fast path off)",
                             lambda c, _sw: throughput.fast_path_off(t, c, figures["throughput_bridge_gbit_s"],
                                                                      CLASSIFIER_CAPACITY))
        if "rate" in only and "rate" not in errors:
            # Issue 14: the switch above runs the defaults (no TX threads, every release precise);
            # the 1 Gbit/s point again in the gigabit shaping configuration on a fresh switch, same
            # run and veths.
            on_second_switch("gigabit", rate.GIGABIT_ARGS, "rate", "rate (gigabit configuration)",
                             lambda c, sw2: rate.gigabit(t, c, sw2.proc.pid))
        if "io_paths" in only:
            # Issue 14: the switch above runs on its default path (AF_PACKET, see
            # config.switch_io); the same figures on AF_XDP, in the same run, on the same veths:
            # the comparison between the two paths.
            on_second_switch(io_paths.OTHER, ["--io", io_paths.OTHER], "io_paths", f"io paths ({io_paths.OTHER})",
                             lambda c, sw2: io_paths.measure(t, c, sw2.proc.pid, figures,
                                                             rate.release_slack_us(sw2.log_path)))
        if "radio" in only and "radio" not in errors:
            # The burst method needs an RX ring that holds a whole burst: a switch of its own.
            on_second_switch("radio", ["--rx-frames", str(radio.RX_FRAMES)], "radio", "radio (throughput)",
                             lambda c, sw2: radio.throughput_ratio(t, c, sw2.proc.pid))
    finally:
        topology.teardown(t)
    # A Mininet lab of its own (the page-load harness), after the bench's veths are gone.
    step("endpoints", endpoints.measure)
    # Its own TwoHostLab too: 1000 rules, iperf3 with and without p4netem web at 1 s refresh.
    step("dashboard", dashboard.measure)
    res["config"]["total_s"] = round(time.monotonic() - started, 1)
    res["environment"]["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]

    res["design_met"] = {k: passed(figures.get(k), b, c) for k, b, c, _, _ in DESIGN if k in figures}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, sort_keys=False) + "\n")
    print_table(res)
    print(f"wrote {out}")
    if errors:
        return 2
    missed = [k for k, b, c, _, _ in BARS if k in figures and passed(figures[k], b, c) is False]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
