"""Many ports whose interfaces come back at once (a container runtime re-creating its veths, a host
whose NICs return): the switch opens them again while the data-plane loop runs on, so the live
ports forward throughout and gRPC health stays SERVING (dataplane/src/io/reopen.rs).

Until 2026-11-30 the loop reopened them itself, one after the other in one turn: each port's open
and the close of its old socket wait for RCU grace periods (~60 ms a port here), so 100 ports
held the loop ~6 s. Nothing else forwarded (pings through the live ports waited up to 6 s, and
those beyond a 64-frame ring were lost), and the loop's heartbeat went past the 3 s timeout:
NOT_SERVING for ~3 s, for a stall that really held every packet. Now the ports open on a worker
thread, all at once (0.6 s for the 100), and the loop swaps each in: pings 2 ms at most.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import PREFIX
from p4netem.p4rt import P4RuntimeError
from pings import ping

N = 100  # extra ports: the old loop held ~6 s (60 ms a port), twice the heartbeat timeout
TIMEOUT_S = 3.0  # --heartbeat-timeout-ms's default: what the switch itself calls a stall
# Small rings: 102 ports at the default 12 MiB each would take 1.2 GiB; the RCU waits, not the ring
# size, made the old reopen slow (60 ms a port either way).
ARGS = ("--rx-frames", "64", "--tx-frames", "64")


def _ip_batch(lines: list[str], netns: str | None = None) -> None:
    cmd = ["ip", *(["-n", netns] if netns else []), "-batch", "-"]
    subprocess.run(cmd, input="\n".join(lines) + "\n", text=True, check=True, capture_output=True, timeout=120)


class ManyPortsLab(TwoHostLab):
    """The two-host lab (h1 on port 1, h2 on port 2) and N more ports 3..N+2 on veths whose other
    ends are in one namespace of the lab (deleting it deletes them all)."""

    def _build_hosts(self) -> None:
        super()._build_hosts()
        self.far = self.resources.namespace(f"{PREFIX}{self.token}x")
        self.extra = {number: f"{PREFIX}{self.token}p{number}" for number in range(3, 3 + N)}
        self.plug_all()
        self.switch_args = (*self.switch_args, *(a for n, iface in self.extra.items() for a in ("-i", f"{n}@{iface}")))

    def plug_all(self, offloads_on: frozenset[int] = frozenset()) -> None:
        """Creates every extra veth pair, the switch ends' offloads off (but on `offloads_on`), then
        brings all up at once."""
        _ip_batch([f"link add {iface} type veth peer name e{n} netns {self.far.name}" for n, iface in self.extra.items()])
        off = [iface for n, iface in self.extra.items() if n not in offloads_on]
        subprocess.run(["sh", "-c", "; ".join(f"ethtool -K {i} tx off rx off gso off tso off gro off >/dev/null || exit 1"
                                              for i in off)], check=True, timeout=300)
        _ip_batch([f"link set e{n} up" for n in self.extra], self.far.name)
        _ip_batch([f"link set {iface} up" for iface in self.extra.values()])

    def unplug_all(self) -> None:
        _ip_batch([f"link del {iface}" for iface in self.extra.values()])


def _until(cond, timeout: float, what: str, log) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what} not within {timeout} s:\n{log()[-3000:]}"
        time.sleep(0.05)


def _ping_summary(out: str) -> tuple[int, int, float]:
    """(transmitted, received, max RTT in ms) of `ping -q`'s summary."""
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    rtt = re.search(r"= [\d.]+/[\d.]+/([\d.]+)/", out)
    assert m and rtt, out
    return int(m[1]), int(m[2]), float(rtt[1])


def _port_up(url: str) -> dict[int, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {int(s.labels["port"]): s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "p4netem_switch_port_up"}


class _HealthPoll:
    """gRPC health (Check of the switch, "") every 0.1 s on a thread, until stopped."""

    def __init__(self, lab: TwoHostLab) -> None:
        self.lab, self.seen, self.stop = lab, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.seen.append(self.lab.client.health(timeout=10))
            except P4RuntimeError as e:
                self.seen.append(f"no answer: {e}")
            time.sleep(0.1)

    def finish(self) -> list[str]:
        self.stop.set()
        self.thread.join(timeout=30)
        return self.seen


def test_many_ports_back_at_once_reopen_while_the_loop_forwards_and_is_serving(start_lab) -> None:
    metrics = f"127.0.0.1:{free_tcp_port('127.0.0.1')}"
    lab = start_lab(*ARGS, "--metrics-addr", metrics, lab_class=ManyPortsLab)
    assert isinstance(lab, ManyPortsLab) and lab.switch is not None and lab.client is not None
    url, log = f"http://{metrics}/metrics", lambda: lab.switch.log_path.read_text()
    assert lab.client.health() == "SERVING"
    assert ping(lab.h1, lab.h2, count=3)[1] == 3

    lab.unplug_all()
    _until(lambda: log().count("the interface was deleted") == N, 60, f"{N} ports gone", log)
    _until(lambda: all(_port_up(url)[n] == 0 for n in lab.extra), 10, "gone ports reported down", log)

    # All back at once, one with its offloads on: that one is not reopened (said once) until they
    # are off, as before.
    blocked = 3 + N - 1
    health = _HealthPoll(lab)
    pings = lab.h1.ns.popen(["ping", "-n", "-q", "-c", "300", "-i", "0.01", "-W", "10", lab.h2.ip],
                            stdout=subprocess.PIPE, text=True)
    try:
        lab.plug_all(offloads_on=frozenset({blocked}))
        _until(lambda: log().count("port reopened") == N - 1, 60, f"{N - 1} ports reopened", log)
        out, _ = pings.communicate(timeout=60)
    finally:
        pings.kill()
        seen = health.finish()
    # Health was polled all along (at least every 0.1 s plus the call): SERVING each time.
    assert seen and set(seen) == {"SERVING"}, [s for s in seen if s != "SERVING"][:5]
    # The live ports forwarded throughout: every ping back, none held as long as a stall.
    sent, received, most = _ping_summary(out)
    assert received == sent == 300, out
    assert most < TIMEOUT_S * 1000, f"a ping through a live port waited {most} ms:\n{out}"

    # Each port came back under its own number and interface, on its start-up path.
    text = log()
    reopened = {int(p): i for p, i in re.findall(r'port reopened port=(\d+) iface=(\S+) io="af_packet"', text)}
    assert reopened == {n: i for n, i in lab.extra.items() if n != blocked}, text[-3000:]
    assert "NOT_SERVING" not in text
    assert text.count(f"port not reopened yet (tried again every second): interface {lab.extra[blocked]} has offloads on") == 1, \
        text[-3000:]
    subprocess.run(["ethtool", "-K", lab.extra[blocked], "tx", "off", "rx", "off", "gso", "off", "tso", "off", "gro",
                    "off"], check=True, capture_output=True, timeout=60)
    _until(lambda: f"port reopened port={blocked} " in log(), 30, f"port {blocked} reopened", log)
    _until(lambda: all(v == 1 for v in _port_up(url).values()), 10, "every port reported up", log)
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    assert lab.client.health() == "SERVING"


MOVED_HELD_MS = 250  # the old loop held pings 0.6-0.8 s here (AF_XDP, N=100); now about 1-3 ms


def test_many_af_xdp_ports_moved_away_at_once_hold_no_live_port_and_come_back(start_lab) -> None:
    """N AF_XDP ports whose interfaces are moved to another namespace at once (`ip link set X netns
    Y`, a container runtime taking its veths): each port lets go of its XDP program (else an
    interface moved back would refuse a new one), and detaching it waits for the kernel (RCU):
    10-40 ms a port here. Until 2026-11-30 the loop did it itself, in the second's check that
    found the ports gone: pings through a live port were held 0.6-0.8 s (`port_gone`). Now the
    worker of dataplane/src/io/reopen.rs detaches them, before it opens any of them again (it takes
    its jobs in order): moved back, every port reopens on AF_XDP."""
    lab = start_lab("--io", "af_xdp", *ARGS, lab_class=ManyPortsLab)
    assert isinstance(lab, ManyPortsLab) and lab.switch is not None and lab.client is not None
    log = lambda: lab.switch.log_path.read_text()  # noqa: E731
    away = lab.resources.namespace(f"{PREFIX}{lab.token}y")
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    health = _HealthPoll(lab)
    pings = lab.h1.ns.popen(["ping", "-n", "-q", "-c", "400", "-i", "0.01", "-W", "10", lab.h2.ip],
                            stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        _ip_batch([f"link set {iface} netns {away.name}" for iface in lab.extra.values()])
        _until(lambda: log().count("the interface was deleted or moved") == N, 60, f"{N} ports gone", log)
        out, _ = pings.communicate(timeout=60)
    finally:
        pings.kill()
        seen = health.finish()
    assert seen and set(seen) == {"SERVING"}, [s for s in seen if s != "SERVING"][:5]
    sent, received, most = _ping_summary(out)
    assert received == sent == 400, out
    assert most < MOVED_HELD_MS, f"a ping through a live port waited {most} ms:\n{out}"

    # Back home, up: each reopens on AF_XDP (its old program was detached, the hook is free).
    _ip_batch([f"link set {iface} netns {os.getpid()}" for iface in lab.extra.values()], away.name)
    _ip_batch([f"link set {iface} up" for iface in lab.extra.values()])
    _until(lambda: log().count("port reopened") == N, 60, f"{N} ports reopened", log)
    reopened = {int(p): i for p, i in re.findall(r'port reopened port=(\d+) iface=(\S+) io="af_xdp"', log())}
    assert reopened == lab.extra, log()[-3000:]
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
