"""What must not change between a run and its resume, or results of two setups get mixed: the
definition as run, the code (commit, uncommitted changes, the switch binary) and the machine's
TCP (kernel and the TCP sysctls a lab namespace starts from). `differences(old, new)` names each
changed field ("definition.repetitions: 2 -> 3"), which `experiment resume` prints when it refuses.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

# TCP settings a lab inherits from the machine (the rest the harness sets in each namespace and
# records per lab): the congestion controls allowed, what a new namespace gets, buffer sizes.
MACHINE_SYSCTLS = (
    "net.ipv4.tcp_allowed_congestion_control", "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_congestion_control", "net.core.rmem_max", "net.core.wmem_max",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mem",
)


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def code_version() -> dict:
    root = _repo_root()
    out: dict = {"commit": None, "uncommitted": None, "switch_sha256": None}
    try:
        out["commit"] = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                       capture_output=True, text=True, timeout=10,
                                       check=True).stdout.strip()
        diff = subprocess.run(["git", "-C", str(root), "diff", "HEAD", "--", ".",
                               ":(exclude)results", ":(exclude)bench/results"],
                              capture_output=True, timeout=20, check=True).stdout
        out["uncommitted"] = hashlib.sha256(diff).hexdigest()[:16] if diff else None
    except (OSError, subprocess.SubprocessError):
        pass
    # The binary the labs will run (P4NETEM_SWITCH overrides the tree's own build).
    from p4netem.paths import switch_binary
    switch = switch_binary()
    if switch.exists():
        h = hashlib.sha256()
        with open(switch, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        out["switch_sha256"] = h.hexdigest()[:16]
    return out


def machine_tcp() -> dict:
    out = {"kernel": os.uname().release}
    for name in MACHINE_SYSCTLS:
        try:
            out[name] = " ".join(Path("/proc/sys", *name.split(".")).read_text().split())
        except OSError:
            out[name] = None
    return out


def identity(definition: dict) -> dict:
    return {"definition": definition, "code": code_version(), "machine_tcp": machine_tcp()}


def differences(old, new, path: str = "") -> list[str]:
    """Every leaf that differs, as 'a.b.c: old -> new'."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in list(dict.fromkeys([*old, *new])):
            out += differences(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
        return out
    if old != new:
        return [f"{path}: {_short(old)} -> {_short(new)}"]
    return []


def _short(v) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."
