"""`p4netem host-check`: the machine's host stalls, measured by the watchers, as a table, as JSON
and as a gate (`--max-stall-ms`, exit 1). A stall is made for real with tests/tools/stallcpu.py: a
real-time busy loop above the watchers' priority holding one CPU, as a stopped virtual CPU would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the watchers need SCHED_FIFO (root)")

P4NETEM = [str(Path(sys.executable).with_name("p4netem"))]  # the venv's console script
STALL_CPU = Path(__file__).resolve().parents[1] / "tools" / "stallcpu.py"
CPU = min(os.sched_getaffinity(0))


def _wait_for_watchers(pid: int, timeout: float = 60.0) -> None:
    """Until host-check has one watcher per CPU running at its real-time priority, and a little
    more: a fixed sleep was too short when the machine was busy (the CLI's imports alone took
    over a second), and a stall made before the watchers watch is not seen."""
    want = len(os.sched_getaffinity(0))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fifo = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid and os.sched_getscheduler(int(stat.parent.name)) == os.SCHED_FIFO:
                    fifo += 1
            except (OSError, IndexError, ValueError):
                continue  # a process that ended meanwhile
        if fifo >= want:
            time.sleep(0.3)  # each prints "ready" and takes its first time stamp right after
            return
        time.sleep(0.05)
    raise AssertionError(f"host-check's {want} watchers did not start within {timeout} s")


def _check(*args: str, stall_ms: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([*P4NETEM, "host-check", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    if stall_ms:
        _wait_for_watchers(proc.pid)
        subprocess.run([sys.executable, str(STALL_CPU), str(CPU), str(stall_ms)], check=True)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_held_cpu_shows_as_a_stall_of_that_cpu_and_fails_the_gate() -> None:
    r = _check("--seconds", "2", "--json", "--max-stall-ms", "30", stall_ms=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    m = json.loads(r.stdout)
    held = next(c for c in m["cpus"] if c["cpu"] == CPU)
    assert held["worst_ms"] >= 40 and held["late_10ms"] >= 1, m
    assert m["worst_ms"] >= held["worst_ms"] and m["late_10ms"] >= 1
    assert len(m["cpus"]) == len(os.sched_getaffinity(0)) and all(c["wakeups"] > 100 for c in m["cpus"]), m
    assert m["realtime"] is True and m["rt_period_us"] > 0


def test_the_table_says_what_a_stall_means_and_a_generous_gate_passes() -> None:
    r = _check("--seconds", "1", "--max-stall-ms", "1000")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "worst wake-up (ms late)" in r.stdout and "steal (time the hypervisor took)" in r.stdout
    # One of the two verdicts, whichever this machine earned in that second.
    assert "The machine stopped a CPU for up to" in r.stdout or "No CPU stopped for 1 ms" in r.stdout


def test_bad_options_are_usage_errors() -> None:
    r = _check("--seconds", "0")
    assert r.returncode == 2 and "--seconds" in r.stderr, r.stderr


def _holds_pm_qos(pid: int) -> bool:
    """Whether the process has the PM QoS device open (its request lives exactly that long)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd) == "/dev/cpu_dma_latency" for fd in fds.iterdir())
    except OSError:  # gone, or an fd closed while listed
        return False


def _latency_in_force() -> int:
    """The kernel's CPU wake-up latency target: the smallest request of every process (s32, us)."""
    with open("/dev/cpu_dma_latency", "rb") as f:
        return int.from_bytes(f.read(4), "little", signed=True)


@pytest.mark.parametrize("value", ["7", "off"])
def test_it_watches_holding_the_switch_wake_up_latency_request_unless_off(value: str) -> None:
    """host-check measures the machine the switch runs on: with the switch's PM QoS request held
    (any value it takes; 0 by default), or, with off, without one."""
    proc = subprocess.Popen([*P4NETEM, "host-check", "--seconds", "2", "--json", "--cpu-latency-us", value],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held, in_force = False, []
    while proc.poll() is None:
        if _holds_pm_qos(proc.pid):
            held = True
            in_force.append(_latency_in_force())
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    m = json.loads(out)
    if value == "off":
        assert not held and m["cpu_latency"]["request_us"] is None and m["cpu_latency"]["error"] is None, m
    else:
        # Other processes' requests (a switch of another test) combine to their minimum.
        assert held and in_force and max(in_force) <= 7, in_force
        assert m["cpu_latency"]["request_us"] == 7, m


def test_the_report_names_the_request_and_the_kernel_preemption_model() -> None:
    r = _check("--seconds", "1")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "wake-up latency request 0 us" in r.stdout and "0 us held, as the switch holds it" in r.stdout, r.stdout
    assert "kernel preemption: " in r.stdout, r.stdout
    r = _check("--seconds", "1", "--cpu-latency-us", "20000")
    assert r.returncode == 2 and "--cpu-latency-us" in r.stderr and "0..10000" in r.stderr, r.stderr


@pytest.mark.parametrize(("debugfs", "version", "cmdline", "config", "mode"), [
    # The scheduler's debugfs file marks the mode in force.
    ("none voluntary (full) lazy\n", "", "", "", "full"),
    # Debian 12's kernel: PREEMPT_DYNAMIC, built voluntary, and preempt= overrides the default.
    ("", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1 (2024-11-01)", "BOOT_IMAGE=/vmlinuz quiet",
     "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n# CONFIG_PREEMPT is not set", "voluntary"),
    ("", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1 (2024-11-01)", "BOOT_IMAGE=/vmlinuz preempt=full quiet",
     "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y", "full"),
    # The development VM's kernel: built none, PREEMPT_BUILD is not a mode.
    ("", "#1 SMP PREEMPT_DYNAMIC @0", "console=ttyS0 quiet",
     "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPTION=y", "none"),
    ("", "#1 SMP PREEMPT_RT Debian 6.1.115-1", "", "", "rt"),
    ("", "#1 SMP PREEMPT Tue Nov 5 2024", "", "", "full"),
    ("", "#1 SMP Tue Nov 5 2024", "", "", "unknown"),
])
def test_the_preemption_model_is_read_as_the_kernel_states_it(debugfs, version, cmdline, config, mode) -> None:
    from p4netem.lab.hoststall import preemption_model
    assert preemption_model(debugfs=debugfs, version=version, cmdline=cmdline, config=config)["mode"] == mode
