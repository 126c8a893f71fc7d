"""--dataplane-cpu: the data-plane thread alone on one CPU, the switch's other threads on the rest
of the CPUs the process may use (dataplane/src/affinity.rs), forwarding as before; a CPU outside
them is refused at start with the option and the allowed list named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from p4netem.lab import LabError, TwoHostLab


def _cpu_list(cpus: list[int]) -> str:
    """The kernel's notation (0-3,6), as /proc/PID/status writes Cpus_allowed_list."""
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def _threads(pid: int) -> dict[int, tuple[str, str]]:
    """tid -> (name, Cpus_allowed_list) of every thread of `pid`."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        allowed = next(line.split(":", 1)[1].strip() for line in (task / "status").read_text().splitlines()
                       if line.startswith("Cpus_allowed_list:"))
        out[int(task.name)] = (name, allowed)
    return out


def test_dataplane_thread_alone_on_its_cpu(switch_bin, tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1]
    lab = TwoHostLab(binary=switch_bin, log_path=tmp_path / "switch.log",
                     switch_args=("--dataplane-cpu", str(cpu))).start()
    try:
        lab.h1.ns.run(["ping", "-c", "3", "-i", "0.2", "-W", "2", lab.h2.ip], timeout=30)
        threads = _threads(lab.switch.proc.pid)
        dp = [a for n, a in threads.values() if n == "p4netem-dp"]
        assert dp == [str(cpu)], threads
        others = [c for c in allowed if c != cpu] or [cpu]
        rest = {n: a for n, a in threads.values() if n != "p4netem-dp"}
        assert rest and all(a == _cpu_list(others) for a in rest.values()), rest
        log = (tmp_path / "switch.log").read_text()
        assert f"data-plane thread on CPU {cpu}" in log
    finally:
        lab.close()


def test_default_leaves_placement_to_the_scheduler(switch_bin, tmp_path):
    allowed = _cpu_list(sorted(os.sched_getaffinity(0)))
    lab = TwoHostLab(binary=switch_bin, log_path=tmp_path / "switch.log").start()
    try:
        threads = _threads(lab.switch.proc.pid)
        assert all(a == allowed for _, a in threads.values()), threads
    finally:
        lab.close()


def test_a_cpu_the_process_may_not_use_is_refused(switch_bin, tmp_path):
    allowed = _cpu_list(sorted(os.sched_getaffinity(0)))
    with pytest.raises(LabError) as e:
        TwoHostLab(binary=switch_bin, log_path=tmp_path / "switch.log",
                   switch_args=("--dataplane-cpu", "1023")).start()
    assert f"--dataplane-cpu 1023: not a CPU this process may run on (allowed: {allowed})" in str(e.value)
