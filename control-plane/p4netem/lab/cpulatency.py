"""The CPU wake-up latency request the switch holds while it runs (Linux PM QoS,
`/dev/cpu_dma_latency`), for the parts of the project that measure timing without a switch.

p4netem-switch holds a request of 0 us by default (`--cpu-latency-us`, dataplane/src/cpu_latency.rs):
idle CPUs then stay in their polling state instead of halting. On a VM a halted vCPU is one the
hypervisor has to run again, and that costs milliseconds there: on the development VM (Firecracker,
cpuidle driver haltpoll with its guest polling off) the host-stall watchers saw 42-187 wake-ups a
millisecond or more late per CPU in 20 s without a request and 2-35 with one (docs/cli.md,
"host-check"). So whatever measures the machine for the switch must hold the same request, or it
measures a machine the switch never runs on: the benchmarks hold it for their whole run (their
baselines, the Linux bridge, must get the same idle states as the switch they are compared with),
`p4netem host-check` while it watches, the timing rerun's quiet wait (p4netem.testing.stalls) while
it waits.

The request holds while the file stays open and is removed when it closes, by us or by the kernel
when the process dies; the requests of several processes combine to their minimum.
"""

from __future__ import annotations

import os

PM_QOS_DEVICE = "/dev/cpu_dma_latency"
DEFAULT_US = 0  # the switch's default (--cpu-latency-us 0)
MAX_US = 10_000  # the switch's flag takes at most this


def parse_us(value: str) -> int | None:
    """`--cpu-latency-us` as the switch takes it: "off" (None) or 0..10000 microseconds."""
    if value == "off":
        return None
    if not value.isdigit() or int(value) > MAX_US:
        raise ValueError(f"must be off or 0..{MAX_US} microseconds, got {value!r}")
    return int(value)


class CpuLatency:
    """`with CpuLatency(us):` holds a PM QoS CPU wake-up latency request of `us` microseconds (None:
    holds nothing). A request that cannot be made (no device, not root) is not an error: `error`
    says why and `held_us` is None."""

    def __init__(self, us: int | None = DEFAULT_US) -> None:
        self.us, self.fd, self.error = us, None, None
        self.held_us: int | None = None  # the request made, still said after the block (describe())

    def __enter__(self) -> CpuLatency:
        if self.us is None:
            return self
        try:
            self.fd = os.open(PM_QOS_DEVICE, os.O_WRONLY)
            # The device takes a binary s32 (or a hex string); one write sets the request.
            os.write(self.fd, self.us.to_bytes(4, "little", signed=True))
            self.held_us = self.us
        except OSError as e:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            self.error = str(e)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def describe(self) -> dict:
        """The request (None if none is held, and why) and the machine's idle states."""
        def read(path: str) -> str:
            try:
                with open(path) as f:
                    return f.read().strip()
            except OSError:
                return ""
        return {"request_us": self.held_us, "error": self.error,
                "cpuidle_driver": read("/sys/devices/system/cpu/cpuidle/current_driver"),
                "cpuidle_governor": read("/sys/devices/system/cpu/cpuidle/current_governor_ro")
                or read("/sys/devices/system/cpu/cpuidle/current_governor")}
