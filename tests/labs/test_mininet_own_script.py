"""P4NetemSwitch in a user's own Mininet script, outside MininetLab (docs/labs.md, "Your own Mininet
script"): with Mininet's default Host class it forwards (ping and TCP: offloads off on the hosts'
ends too), on two switches; a profile applied with `p4netem apply --switch` or the controller API
shows in the RTT; the switch dies with a script killed outright; the shipped example runs and the
doc shows it as it is."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from p4netem.lab import tokens
from lab_env import alive, assert_gone

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mininet" / "my_topology.py"
P4NETEM = str(Path(sys.executable).parent / "p4netem")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT / "control-plane"), str(ROOT / "studies"), os.environ.get("PYTHONPATH", "")])}


def _prefix(use: str) -> str:
    """A node-name prefix of 8 characters for one `use` (a capital letter) of this process:
    Mininet names interfaces `{node}-eth{N}`, Linux allows 15 characters, and the example's
    `{prefix}s1-eth1` leaves 8, so a lab token (p4n and 8) is too long here. "p4" and the pid's 5
    base-36 digits (the first 0-2: never "p4n", so no lab's name or sweep meets it)."""
    return f"p4{tokens.base36(os.getpid(), tokens.PID_DIGITS)}{use}"


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("Mininet needs root (namespaces, raw sockets)", pytrace=False)


def _min_rtt_ms(host, dst: str) -> float:
    out = host.cmd(f"ping -c 3 -i 0.2 -W 3 {dst}")
    m = re.search(r"= ([\d.]+)/", out)
    assert m, out
    return float(m.group(1))


@pytest.fixture(scope="module")
def net(switch_bin):
    """a, b on switch s (ports 1, 2), s port 3 to switch t, c on t: Mininet's own Host class,
    names with a token of this process (Mininet names interfaces after nodes)."""
    _need_root()
    from mininet.net import Mininet
    from mininet.topo import Topo

    from p4netem_studies.mininet import P4NetemSwitch

    p = _prefix("N")

    class TwoSwitches(Topo):
        def build(self):
            s, t = (self.addSwitch(f"{p}{n}", binary=switch_bin) for n in "st")
            self.addLink(self.addHost(f"{p}a"), s)
            self.addLink(self.addHost(f"{p}b"), s)
            self.addLink(s, t)
            self.addLink(self.addHost(f"{p}c"), t)

    Mininet.inited = True  # no fixLimits: machine-wide sysctls on a shared machine
    # Three ports on s: the switch floods nothing, so ARP entries are static (as documented).
    mn = Mininet(topo=TwoSwitches(), switch=P4NetemSwitch, controller=None, autoStaticArp=True)
    try:
        mn.start()
        yield mn
    finally:
        mn.stop()


def test_default_hosts_ping_and_tcp_across_two_switches(net):
    assert net.pingAll(timeout=3) == 0
    a, _, c = net.hosts
    for host in net.hosts:
        # Before the fix only the switch's ends were: host frames kept checksums for the
        # hardware to fill, and TCP crawled (about 17 KB/s) while ping looked fine.
        feats = host.cmd(f"ethtool -k {host.defaultIntf().name}")
        for feat in ("tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload",
                     "generic-receive-offload"):
            assert re.search(rf"^{feat}: off", feats, re.M), (host.name, feats)
    c.cmd("iperf -s -p 5001 &")
    from mininet.util import waitListening
    waitListening(a, c, 5001, timeout=10)
    try:
        report = a.cmd(f"timeout 30 iperf -c {c.IP()} -p 5001 -n 8M -y C; echo rc=$?")
    finally:
        c.cmd("kill %iperf")
    assert "rc=0" in report, report
    assert int(report.strip().splitlines()[-2].split(",")[-2]) >= 8 * 2**20, report


def test_a_profile_from_the_cli_and_the_controller_api_shows_in_the_rtt(net):
    from p4netem.control import Controller, Profile
    a, b, _ = net.hosts
    addr = net.switches[0].grpc_addr
    r = subprocess.run([P4NETEM, "apply", "wan-90ms", "--switch", addr], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _min_rtt_ms(a, b.IP()) >= 90
    with Controller.connect(addr) as ctl:
        ctl.apply(Profile.parse({"name": "d40", "both": {"delay": "20ms"}}))
        assert 40 <= _min_rtt_ms(a, b.IP()) < 90
        ctl.reset()


KILLED = textwrap.dedent("""
    import sys, time
    from mininet.net import Mininet
    from mininet.topo import SingleSwitchTopo
    from p4netem_studies.mininet import P4NetemSwitch

    prefix, binary = sys.argv[1:]

    class Prefixed(SingleSwitchTopo):   # h1, h2, s1 with our prefix: their interfaces are ours
        def addHost(self, name, **opts):
            return super().addHost(prefix + name, **opts)

        def addSwitch(self, name, **opts):
            return super().addSwitch(prefix + name, binary=binary, **opts)

    Mininet.inited = True
    net = Mininet(topo=Prefixed(2), switch=P4NetemSwitch, controller=None)
    net.start()
    print(net.switches[0].process.proc.pid, *[h.pid for h in net.hosts], flush=True)
    time.sleep(300)
""")


def test_the_switch_dies_with_a_script_killed_outright(tmp_path, switch_bin):
    """A script killed by SIGKILL runs no cleanup: its hosts' shells end with it (their
    namespaces and links go), and the switch used to run on, forever."""
    _need_root()
    p = _prefix("K")
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    proc = subprocess.Popen([sys.executable, str(script), p, switch_bin], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        line = proc.stdout.readline()
        assert line.strip(), proc.stderr.read() if proc.poll() is not None else "no pids"
        pids = [int(x) for x in line.split()]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    try:
        assert_gone(p, pids, timeout=20)
    finally:
        if alive(pids[0]):
            os.kill(pids[0], signal.SIGKILL)  # the switch a regression left running


def test_the_example_runs_with_its_profile():
    _need_root()
    r = subprocess.run([sys.executable, str(EXAMPLE), "--prefix", _prefix("X")],
                       capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    rtt = re.search(r"ping h1 -> h2: rtt min ([\d.]+) ms", r.stdout)
    rate = re.search(r"iperf h1 -> h2: ([\d.]+) Mbit/s", r.stdout)
    assert rtt and rate, r.stdout + r.stderr
    assert float(rtt.group(1)) >= 40                 # 20 ms each way
    assert 1 < float(rate.group(1)) <= 10.5          # 10 Mbit/s


def test_the_doc_shows_the_example_as_it_is():
    doc = (ROOT / "docs" / "labs.md").read_text()
    assert EXAMPLE.read_text().strip() in doc


def test_the_switch_is_importable_from_the_package_without_importing_mininet_before():
    from p4netem_studies.mininet import P4NetemSwitch
    from p4netem_studies.mininet.nodes import P4NetemSwitch as in_nodes
    assert P4NetemSwitch is in_nodes
    r = subprocess.run([sys.executable, "-c", "import sys, p4netem_studies.mininet as m; "
                        "print('mininet' in sys.modules, m.topology_names is not None)"],
                       capture_output=True, text=True, env=ENV, timeout=60)
    assert r.stdout.split() == ["False", "True"], r.stdout + r.stderr


def test_only_the_main_thread_ties_the_switch_to_its_owner():
    """PR_SET_PDEATHSIG follows the thread that starts the child: from another thread (which may
    end while the process and its network live on) the switch is started without it."""
    import threading

    from p4netem.lab.switch import owner_death_prefix
    assert owner_death_prefix() == ["setpriv", "--pdeathsig", "TERM", "--"]
    seen = []
    t = threading.Thread(target=lambda: seen.append(owner_death_prefix()))
    t.start()
    t.join()
    assert seen == [[]]


_IMPORTS = """
import sys, warnings
with warnings.catch_warnings():
    warnings.simplefilter("error", DeprecationWarning)    # the imports themselves do not warn
    import p4netem_studies.mininet.lab, p4netem_studies.mininet.cli
    import mininet.node
from distutils.version import StrictVersion
warnings.simplefilter("ignore", DeprecationWarning)       # its own "use packaging" warning
print(sys.modules["distutils"].__file__, "setuptools" in sys.modules, StrictVersion("2.3.0") < StrictVersion("2.10"))
"""


def test_the_lab_modules_give_mininet_the_standard_library_distutils():
    """mininet.node imports distutils.version: through the venv's setuptools shim
    (distutils-precedence.pth) that imported all of setuptools, 0.3 s of every process that
    starts a lab (a second on a busy machine). The lab modules have it take the standard
    library's, which has the same StrictVersion; setuptools stays unimported."""
    out = subprocess.run([sys.executable, "-c", _IMPORTS], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in ENV.items() if k != "SETUPTOOLS_USE_DISTUTILS"})
    assert out.returncode == 0, out.stderr[-3000:]
    path, setuptools, compares = out.stdout.split()
    assert path.startswith(sys.base_prefix) and "setuptools" not in path, path
    assert (setuptools, compares) == ("False", "True")
