"""One switch per interface (dataplane/src/io/port_lock.rs). Before 2026-11-30 a second
p4netem-switch started on the interfaces of a running one (a second shell, a service plus a manual
run) opened them too: both sockets got every frame and both forwarded it, so every datagram arrived
twice, through two sets of impairments and counters. Only the fast path's XDP attach noticed, and
`--fast-path auto` fell back to off and went on. Now the second switch exits at start naming the
interface and the first switch's pid, and the first forwards on, unharmed."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import PREFIX, LabError, Resources, disable_offloads, run, unique_token
from p4netem.lab.probe import run_probe
from p4netem.lab.switch import SwitchProcess
from pings import ping

# The lab's switch: AF_PACKET without the fast path (nothing else can notice a second switch
# there), and AF_XDP in copy mode (whose second socket shares the first's XDP program's queue).
MODES = {"af_packet": ("--fast-path", "off"), "af_xdp": ("--io", "af_xdp")}


def _forwards_once(lab: TwoHostLab, port: int) -> None:
    """200 datagrams h1 -> h2 arrive, each exactly once."""
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=200, rate=500, port=port)
    assert (result.sent, result.unique, result.duplicates) == (200, 200, 0), \
        f"sent {result.sent}, arrived {result.unique} distinct, {result.duplicates} duplicates"


def _refused(lab: TwoHostLab, binary: str, log, *args: str) -> str:
    """Starts a second switch on the lab's interfaces, configured to forward 1 <-> 2 on its own
    (as a service would be), which must exit 1 at start. Its log."""
    assert lab.switch is not None and lab.switch.proc is not None
    second = SwitchProcess({1: lab.h1.switch_iface, 2: lab.h2.switch_iface}, binary=binary, log_path=log,
                           extra_args=[*args, "--static-port-map", "1:2,2:1"],
                           resources=lab.resources)  # stopped with the lab if it runs
    with pytest.raises(LabError, match="exited with code 1 during start-up"):
        second.start()
    out = second.log_tail(20)
    pid = lab.switch.proc.pid
    expected = (f"port 1: interface {lab.h1.switch_iface} is already a port of p4netem-switch pid {pid} "
                f"(P4Runtime {lab.switch.grpc_addr}) in this network namespace; stop it first")
    assert expected in out, out
    assert "data plane ready" not in out, out
    return out


@pytest.mark.parametrize("mode", MODES)
def test_a_second_switch_on_the_same_interfaces_is_refused_and_the_first_forwards_on(
        start_lab, switch_bin, tmp_path, mode: str) -> None:
    lab = start_lab(*MODES[mode])
    _forwards_once(lab, 9081)
    _refused(lab, switch_bin, tmp_path / "second.log", *MODES[mode])
    assert lab.switch is not None and lab.switch.running(), lab.switch.log_tail(30)
    _forwards_once(lab, 9082)

    # A port whose interface is deleted and created again keeps its lock (held by name).
    lab.unplug(lab.h1)
    lab.replug(lab.h1)
    deadline = time.monotonic() + 15
    while "port reopened" not in lab.switch.log_tail(200) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "port reopened" in lab.switch.log_tail(200), lab.switch.log_tail(30)
    _refused(lab, switch_bin, tmp_path / "third.log", *MODES[mode])
    _forwards_once(lab, 9083)


def test_after_the_first_switch_is_killed_a_new_one_takes_its_interfaces(start_lab, switch_bin, tmp_path) -> None:
    """SIGKILL leaves no lock behind: the kernel drops an flock with its process."""
    lab = start_lab("--fast-path", "off")
    assert lab.switch is not None and lab.switch.proc is not None
    lab.switch.proc.send_signal(signal.SIGKILL)
    lab.switch.proc.wait(timeout=30)
    # Forwarding without a controller: port_map 1 <-> 2 installed at start.
    new = SwitchProcess({1: lab.h1.switch_iface, 2: lab.h2.switch_iface}, binary=switch_bin,
                        log_path=tmp_path / "new.log", extra_args=["--static-port-map", "1:2,2:1"],
                        resources=lab.resources).start()
    assert new.running(), new.log_tail(30)
    deadline = time.monotonic() + 10
    while ping(lab.h1, lab.h2, count=1)[1] != 1 and time.monotonic() < deadline:
        pass
    assert ping(lab.h1, lab.h2, count=3) == (3, 3), new.log_tail(30)


def test_an_interface_of_the_same_name_in_another_namespace_is_another_port(switch_bin, tmp_path) -> None:
    """Two switches, each in a namespace of its own on a veth named alike there: both start."""
    if os.geteuid() != 0:
        pytest.fail("wire tests need root (network namespaces, raw sockets)", pytrace=False)
    token = unique_token()
    with Resources(owner_prefix=f"{PREFIX}{token}", kind="test") as res:
        switches = []
        for side in "ab":
            ns = res.namespace(f"{PREFIX}{token}{side}")
            res.veth("sw0", "peer0", ns, ns)
            for dev in ("sw0", "peer0"):
                disable_offloads(dev, ns.name)
                ns.run(["ip", "link", "set", dev, "up"])
            log_path = tmp_path / f"switch-{side}.log"
            with open(log_path, "wb") as log:  # the switch writes to its own copy of the descriptor
                proc = ns.popen([switch_bin, "-i", "1@sw0", "--fast-path", "off", "--grpc-addr",
                                 f"127.0.0.1:{free_tcp_port()}"], stdout=log, stderr=subprocess.STDOUT)
            switches.append((proc, log_path))
        for proc, log_path in switches:
            deadline = time.monotonic() + 30
            while "data plane ready" not in log_path.read_text() and proc.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            assert proc.poll() is None and "data plane ready" in log_path.read_text(), log_path.read_text()
