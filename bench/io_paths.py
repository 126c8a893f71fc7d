"""Issue 14: the switch's two packet I/O paths side by side in one bench run. The main switch of
the run uses its default path (`--io af_packet`, TPACKET_V2 rings; recorded as config.switch_io);
this step starts a second switch forced onto AF_XDP in copy mode (`--io af_xdp`) on the same veths
and measures what the issue's figures measure on it: iperf3 TCP against the same run's bridge
baseline, and the data-plane thread's CPU while it shapes 1 Gbit/s under 2x overload (with that
rate's error)."""
from __future__ import annotations

import re
from pathlib import Path

import rate
import throughput
import topo as topology

OTHER = "af_xdp"  # the path this step measures (the run's main switch has the default)


def ports_io(log_path: Path | None) -> dict[str, str]:
    """{iface: io} from the switch's "port up: <io>" log lines."""
    if log_path is None or not Path(log_path).exists():
        return {}
    text = Path(log_path).read_text(errors="replace")
    return {m.group(2): m.group(1) for m in re.finditer(r"port up: (\w+) .*?iface=(\S+)", text)}


def measure(t: topology.Topo, ctl, switch_pid: int, figures: dict, slack_us: int | None = None) -> dict:
    """`figures`: the run's so far; with the throughput step's bridge median among them, iperf3 is
    compared with it too."""
    out: dict = {}
    if "throughput_bridge_gbit_s" in figures:
        sw = throughput.through_switch(t)
        out[f"throughput_switch_{OTHER}_gbit_s"] = sw["gbit_s"]
        out[f"throughput_ratio_vs_bridge_{OTHER}"] = sw["gbit_s"] / figures["throughput_bridge_gbit_s"]
    ctl.classify_by_ingress_port()
    line = rate.one_line_rate(t, ctl, rate.LINE_RATES[0], switch_pid, slack_us)
    out[f"rate_1g_dataplane_busy_pct_{OTHER}"] = line["dp_thread_cpu_pct"]
    out[f"rate_1g_error_pct_{OTHER}"] = line["error_pct"]
    out["io_paths_config"] = {f"{OTHER}_line_rate": line,
                              "default_path_figures": {k: figures.get(k) for k in (
                                  "throughput_ratio_vs_bridge", "rate_1g_dataplane_busy_pct")}}
    return out
