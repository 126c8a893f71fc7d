"""A stop during start-up is a clean stop (dataplane/src/main.rs, `stop_signals`). Before
2026-11-30 the switch bound its gRPC port, then opened the ports (XDP, rings: a while with many
ports), and only then installed its SIGINT/SIGTERM handlers: a SIGTERM in that window (a supervisor
stopping the switch as soon as it listens, systemd's `stop` while it starts) took the default action
and killed it (exit -15) without its teardown: no final counters, pcap files left empty, port lock
files left in /run/p4netem/ports. Now the signals are blocked from the first line of main, a stop
that arrived during start-up is honoured as soon as start-up ends (logged), with the same teardown
as any stop, and the exit status is 0.

Deterministic, not timed: the signal goes at a state the test observes in /proc (the switch's own
listening socket; or SIGTERM blocked in the process, before it listens), not after a sleep."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import PREFIX, Resources, disable_offloads, unique_token
from p4netem.lab.switch import _listens

PORTS = 3
CYCLES = 12
LOCK_DIR = Path("/run/p4netem/ports")
STOPPED = re.compile(r"SIGTERM( during start-up)?: shutting down")


def _sigterm_blocked(pid: int) -> bool:
    """Whether SIGTERM is in the blocked mask of process `pid`'s main thread."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    blocked = re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.M)
    return blocked is not None and int(blocked.group(1), 16) & (1 << (signal.SIGTERM - 1)) != 0


def _wait_for(proc: subprocess.Popen, ready, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and proc.poll() is None:
        assert time.monotonic() < deadline, "the switch did not get there in 60 s"
        time.sleep(0.001)


def _netns_inode(ns: str) -> int:
    return os.stat(f"/run/netns/{ns}").st_ino


@pytest.mark.parametrize("when,pcap", [("at_listen", False), ("before_listen", False), ("at_listen", True)],
                         ids=["at-listen", "before-listen", "at-listen-pcap"])
def test_sigterm_during_start_up_stops_the_switch_cleanly(switch_bin, tmp_path, when: str, pcap: bool) -> None:
    if os.geteuid() != 0:
        pytest.fail("wire tests need root (network namespaces, raw sockets, XDP)", pytrace=False)
    token = unique_token()
    with Resources(owner_prefix=f"{PREFIX}{token}", kind="test") as res:
        ns = res.namespace(f"{PREFIX}{token}s")
        ifaces = [f"sw{i}" for i in range(1, PORTS + 1)]
        for i, iface in enumerate(ifaces, 1):
            res.veth(iface, f"peer{i}", ns, ns)
            for dev in (iface, f"peer{i}"):
                disable_offloads(dev, ns.name)
                ns.run(["ip", "link", "set", dev, "up"])
        locks = [LOCK_DIR / f"{_netns_inode(ns.name)}-{iface}" for iface in ifaces]
        failures: list[str] = []
        during_start_up = 0
        fast_path_on = 0
        for cycle in range(CYCLES):
            port = free_tcp_port()
            log_path = tmp_path / f"switch-{cycle}.log"
            pcap_dir = tmp_path / f"pcap-{cycle}"
            cmd = [switch_bin, "--grpc-addr", f"127.0.0.1:{port}", "--static-port-map", "1:2,2:1"]
            cmd += [arg for i, iface in enumerate(ifaces, 1) for arg in ("-i", f"{i}@{iface}")]
            if pcap:
                pcap_dir.mkdir()
                cmd += ["--pcap", str(pcap_dir)]
            with open(log_path, "wb") as log:
                proc = ns.popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            if when == "at_listen":
                _wait_for(proc, lambda: _listens(proc.pid, port))
            else:
                # Still starting: SIGTERM already held off (the new switch's first line), or, for
                # a switch that never holds it off, the moment it listens.
                _wait_for(proc, lambda: _sigterm_blocked(proc.pid) or _listens(proc.pid, port))
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
            log = log_path.read_text(errors="replace")
            during_start_up += "during start-up" in log
            fast_path_on += "fast path: on" in log
            problems = []
            if code != 0:
                problems.append(f"exit status {code}")
            if not STOPPED.search(log):
                problems.append("no shutdown log line")
            if "port down" not in log:
                problems.append("no teardown (no 'port down' line)")
            xdp = [iface for iface in ifaces
                   if re.search(r"\bxdp", ns.run(["ip", "-d", "link", "show", "dev", iface]).stdout)]
            if xdp:
                problems.append(f"XDP program still attached to {xdp}")
            left = [str(p) for p in locks if p.exists()]
            if left:
                problems.append(f"port lock files left: {left}")
                for p in left:  # not to count them again in the next cycles
                    Path(p).unlink(missing_ok=True)
            if pcap:
                short = [f.name for f in sorted(pcap_dir.iterdir()) if f.stat().st_size < 24]
                if short or len(list(pcap_dir.iterdir())) != 2 * PORTS:
                    problems.append(f"pcap files without their header: {short}")
            if problems:
                failures.append(f"cycle {cycle}: {', '.join(problems)}\n{log[-1500:]}")
        print(f"{when}{' pcap' if pcap else ''}: {len(failures)}/{CYCLES} unclean stops, "
              f"{during_start_up} logged as during start-up, fast path on in {fast_path_on}")
        assert not failures, f"{len(failures)} of {CYCLES} stops were not clean:\n" + "\n".join(failures[:3])
