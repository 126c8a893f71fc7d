"""Where a result was made: the host, the p4netem build and the lab. Every runner (page loads,
workloads) writes the same block into its metadata, so their result files compare.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path


def command_line(argv: list[str]) -> str:
    """First line a command prints (stdout, else stderr: some tools print versions there);
    "" when it cannot run."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (p.stdout or p.stderr).strip()
    return text.splitlines()[0] if text else ""


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def run_context(plan: dict, target: str, lab) -> dict:
    """plan, start time, host, p4netem build (git, switch binary) and the lab's namespaces."""
    from p4netem.paths import REPO_ROOT, switch_binary

    binary = switch_binary()
    return {
        "plan": plan,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"kernel": platform.release(), "machine": platform.machine(),
                 "cpus": os.cpu_count() or 0, "loadavg_start": loadavg(),
                 "python": sys.version.split()[0]},
        "p4netem": {"git": command_line(["git", "-C", str(REPO_ROOT), "describe", "--always",
                                         "--dirty"]),
                    "switch_target": target, "switch_binary": str(binary),
                    "switch_mtime": binary.stat().st_mtime if binary.exists() else None},
        "topology": lab.topology.to_json(),
        "lab": {"namespaces": {h.name: lab.ns(h.name) for h in lab.topology.hosts},
                "switch_grpc": lab.switch.grpc_addr},
    }
