"""A port whose link goes down and up again: the switch says so and forwards again, and its
data-plane thread goes back to sleeping. Before 2026-11-29 the error the kernel leaves pending on
the port's AF_PACKET socket ended every ppoll at once, so after one link flap the thread spun at
50-80 % of a CPU for the rest of its life, with nothing in the log."""

from __future__ import annotations

import os
import time

from p4netem.lab import TwoHostLab, run
from pings import ping

DP_THREAD = "p4netem-dp"


def _dp_cpu_ns(pid: int) -> int:
    """CPU time of the switch's data-plane thread so far (the scheduler's own accounting)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        d = f"/proc/{pid}/task/{task}"
        if open(f"{d}/comm").read().strip() == DP_THREAD:
            return int(open(f"{d}/schedstat").read().split()[0])
    raise AssertionError(f"no {DP_THREAD} thread in pid {pid}")


def test_a_link_flap_is_logged_and_the_loop_sleeps_again(lab: TwoHostLab) -> None:
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    assert lab.switch is not None and lab.switch.proc is not None
    iface = lab.h1.switch_iface
    run(["ip", "link", "set", iface, "down"])
    time.sleep(0.5)
    run(["ip", "link", "set", iface, "up"])
    time.sleep(0.5)

    # Idle, with nothing sent on the port since (a send would have collected the pending error):
    # the thread sleeps in ppoll. Spinning on the error took 0.5-0.8 s of CPU a second; an idle
    # loop takes milliseconds, however busy the machine (the thread's own CPU time, not the wall
    # clock's).
    pid = lab.switch.proc.pid
    before, t0 = _dp_cpu_ns(pid), time.monotonic()
    time.sleep(2.0)
    used = (_dp_cpu_ns(pid) - before) / ((time.monotonic() - t0) * 1e9)
    assert used < 0.2, f"data-plane thread busy {used:.0%} of a CPU while idle after the link flap"

    deadline = time.monotonic() + 10
    while ping(lab.h1, lab.h2, count=3)[1] != 3 and time.monotonic() < deadline:
        pass
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    log = lab.switch.log_tail(200)
    assert "port error" in log and "link down?" in log, log
