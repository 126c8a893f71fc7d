"""Nothing of a lab outlives its process killed outright (SIGKILL to the process alone, as a
user's `kill -9 PID` sends it): `p4netem measure` (the path of `make run`), `p4netem lab up`, and a
user's own script with a TwoHostLab, LabHosts around a P4NetemSwitch, or a bare SwitchProcess. Each
lab's owner starts its reaper before its first lab record (p4netem.lab.reaper), which removes
within seconds what the owner's records list: processes (in the lab's namespaces, and the switch),
namespaces, links, temporary directories and the records; a live lab beside it (its record in
the same directory) is untouched. Before, all of it stayed until the next lab started or someone
ran `p4netem lab clean` (a bare SwitchProcess, and a LabHost's namespace, even then)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from p4netem.lab import tokens
from p4netem.lab.owner import links, netns_names, start_ticks
from lab_env import ChildOutput, alive, assert_gone

P4NETEM = str(Path(sys.executable).parent / "p4netem")
GONE_WITHIN_S = 60      # generous: the reaper's own SIGTERM grace is 3 s, the machine is loaded


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("labs need root (namespaces, raw sockets)", pytrace=False)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Lab records of this module's own (P4NETEM_RUN_DIR, for this process and the killed ones):
    a lab starting elsewhere on the machine would otherwise remove a killed lab (its dead owner's)
    before the test could tell whether the reaper did."""
    path = tmp_path_factory.mktemp("run")
    saved = os.environ.get("P4NETEM_RUN_DIR")
    os.environ["P4NETEM_RUN_DIR"] = str(path)
    try:
        yield path
    finally:
        if saved is None:
            os.environ.pop("P4NETEM_RUN_DIR", None)
        else:
            os.environ["P4NETEM_RUN_DIR"] = saved


class LiveLab:
    """A lab of this (live) process beside the killed ones: it must be untouched."""

    def __init__(self, lab):
        self.lab = lab
        self.namespaces = [lab.ns(h.name) for h in lab.topology.hosts]
        self.sleeper = subprocess.Popen(["ip", "netns", "exec", lab.ns("server"), "sleep", "3600"],
                                        start_new_session=True)
        self.switch = lab.switch.process.proc.pid

    def assert_untouched(self) -> None:
        assert set(self.namespaces) <= set(netns_names()), netns_names()
        assert alive(self.sleeper.pid) and alive(self.switch)
        assert self.lab.record is not None and self.lab.record.path.exists()
        self.lab.run("client", ["ping", "-c", "1", "-W", "5", self.lab.ip("server")])


@pytest.fixture(scope="module")
def live(run_dir, switch_bin):
    _need_root()
    from p4netem_studies.mininet import load_topology
    from p4netem_studies.mininet.lab import MininetLab
    with MininetLab(load_topology("inline").expand(), binary=switch_bin) as lab:
        one = LiveLab(lab)
        try:
            yield one
        finally:
            one.sleeper.kill()
            one.sleeper.wait()


def _start(argv: list[str], run_dir: Path) -> tuple[subprocess.Popen, ChildOutput]:
    # Its own process group, as a shell's job: the SIGKILL goes to its leader only, as `kill -9`.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            env={**os.environ, "COLUMNS": "200", "P4NETEM_RUN_DIR": str(run_dir)})
    return proc, ChildOutput(proc)


def _records_of(run_dir: Path, pid: int) -> list[dict]:
    out = []
    for path in run_dir.glob("p4n*.json"):
        doc = json.loads(path.read_text())
        if doc["owner"]["pid"] == pid:
            out.append({**doc, "path": path})
    return out


def _ns_pids(names: list[str]) -> list[int]:
    out = []
    for name in names:
        r = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        out += [int(p) for p in r.stdout.split()]
    return out


def _reapers(owner: int) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"p4netem/lab/reaper\\.py --pidfd [0-9]+ .*--owner {owner}$"],
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


class Killed:
    """What one owner had when it was killed: its records, their names, processes and dirs."""

    def __init__(self, proc: subprocess.Popen, run_dir: Path, names: list[str] = (),
                 pids: list[int] = ()):
        self.proc = proc
        self.records = _records_of(run_dir, proc.pid)
        self.namespaces = sorted({n for r in self.records for n in r["namespaces"]} | set(names))
        self.links = sorted({l for r in self.records for l in r["links"]})
        self.dirs = sorted({d for r in self.records for d in r.get("dirs", [])})
        self.pids = sorted({*(p["pid"] for r in self.records for p in r["processes"]),
                            *_ns_pids(self.namespaces), *pids})
        self.reapers = _reapers(proc.pid)

    def kill(self) -> float:
        """SIGKILL to the owner alone; the moment it died."""
        assert self.pids, "the owner had no process running: the test shows nothing"
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        return time.monotonic()

    def assert_all_gone(self, died: float) -> float:
        """Everything gone within GONE_WITHIN_S of the kill; returns how long it took."""
        left = lambda: ([n for n in self.namespaces if n in netns_names()]
                        + [l for l in self.links if l in links()]
                        + [f"pid {p} ({_comm(p)})" for p in [*self.pids, *self.reapers] if alive(p)]
                        + [str(r["path"]) for r in self.records if r["path"].exists()]
                        + [d for d in self.dirs if os.path.exists(d)])
        while left() and time.monotonic() - died < GONE_WITHIN_S:
            time.sleep(0.2)
        took = time.monotonic() - died
        assert not left(), f"{took:.0f} s after the SIGKILL, still there: {left()}"
        return took

    def cleanup(self) -> None:
        """What a failed test (the old code) left: this owner's only."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        from p4netem.lab.owner import clean_dead_labs
        clean_dead_labs()          # the module's run_dir: records of dead owners (the killed ones)
        for pid in [*self.pids, *_ns_pids(self.namespaces)]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        for name in self.namespaces:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def test_a_killed_measure_leaves_nothing(live, run_dir, tmp_path):
    """`p4netem measure` (make run's command) killed in the middle of its loads: nginx, tcpdump,
    the hosts' shells, the switch, both namespaces and links, the run's temporary directory
    (pages, pcaps) and the record go within seconds; the results directory stays."""
    proc, out = _start([P4NETEM, "measure", "--profile", "lan", "--protocol", "h2", "--reps", "50",
                        "--out", str(tmp_path / "results")], run_dir)
    killed = None
    try:
        out.wait_for(r"lan\s+h2 iw10\s+#2", 240)
        killed = Killed(proc, run_dir)
        assert len(killed.records) == 1 and killed.namespaces and killed.dirs, killed.records
        assert {"nginx", "p4netem-switch"} <= {_comm(p) for p in killed.pids}, killed.pids
        took = killed.assert_all_gone(killed.kill())
        print(f"measure: its lab gone {took:.1f} s after the SIGKILL")
        assert (tmp_path / "results" / "logs" / "switch.log").exists()
        live.assert_untouched()
    finally:
        (killed or Killed(proc, run_dir)).cleanup()


def test_a_killed_lab_up_leaves_nothing(live, run_dir):
    """`p4netem lab up --serve` killed at its script: nginx, node-spdy, the client's command, the
    switch, namespaces, links, its temporary directory and record go within seconds."""
    proc, out = _start([P4NETEM, "lab", "up", "inline", "--serve", "demo", "--cmd", "client sleep 300"],
                       run_dir)
    killed = None
    try:
        out.wait_for(r"serving page 'demo'", 240)
        time.sleep(0.5)               # the client's sleep starts
        killed = Killed(proc, run_dir)
        assert {"nginx", "node", "p4netem-switch"} <= {_comm(p) for p in killed.pids}, killed.pids
        took = killed.assert_all_gone(killed.kill())
        print(f"lab up: its lab gone {took:.1f} s after the SIGKILL")
        live.assert_untouched()
    finally:
        (killed or Killed(proc, run_dir)).cleanup()


TWOHOST = """
import subprocess, sys, time
from p4netem.lab import TwoHostLab
lab = TwoHostLab(binary=sys.argv[1], log_path=sys.argv[2] + "/switch.log").start()
lab.h2.ns.popen(["iperf3", "-s"], stdout=subprocess.DEVNULL)
print("ready", flush=True)
time.sleep(600)
"""

# LabHosts (named namespaces) around a P4NetemSwitch in a user's own Mininet script; a server
# that daemonizes (`iperf3 -D`: its own session, its parent gone) is found by its namespace.
LABHOSTS = """
import sys, time
from mininet.net import Mininet
from mininet.topo import Topo
from p4netem_studies.mininet import LabHost, P4NetemSwitch
p = sys.argv[3]
class Hosts(Topo):
    def build(self):
        s = self.addSwitch(p + "s", binary=sys.argv[1], log_path=sys.argv[2] + "/switch.log")
        for h in ("h1", "h2"):
            self.addLink(self.addHost(p + h, cls=LabHost, netns=p + h), s)
Mininet.inited = True
net = Mininet(topo=Hosts(), switch=P4NetemSwitch, controller=None)
net.start()
net.hosts[1].cmd("iperf3 -s -D")
print("ready", net.switches[0].process.proc.pid, flush=True)
time.sleep(600)
"""

# A switch started from a thread other than the main one: nothing ties it to its owner
# (PR_SET_PDEATHSIG follows the thread), only its record does.
SWITCH = """
import sys, threading, time
from p4netem.lab import SwitchProcess
started = []
t = threading.Thread(target=lambda: started.append(SwitchProcess(
    {}, binary=sys.argv[1], log_path=sys.argv[2] + "/switch.log",
    extra_args=["--rt-priority", "0"]).start()))
t.start()
t.join()
print("ready", started[0].proc.pid, flush=True)
time.sleep(600)
"""


def _name_prefix() -> str:
    """Node and namespace names of the LabHost script: Mininet names interfaces `{node}-eth0`
    (15 characters at most); "p4" and this process's pid in base 36 (never "p4n": no lab's
    name or sweep meets it)."""
    return f"p4{tokens.base36(os.getpid(), tokens.PID_DIGITS)}K"


@pytest.mark.parametrize("script", ["twohost", "labhosts", "switch"])
def test_a_killed_user_script_leaves_nothing(live, run_dir, tmp_path, switch_bin, script):
    """A user's script that built a lab with the Python API, killed: TwoHostLab (its switch and
    namespaces stayed, with iperf3), LabHosts (their named namespaces stayed, holding a
    daemonized iperf3 and the switch's links), a SwitchProcess (stayed, forever)."""
    p = _name_prefix()
    code = {"twohost": TWOHOST, "labhosts": LABHOSTS, "switch": SWITCH}[script]
    proc, out = _start([sys.executable, "-c", code, switch_bin, str(tmp_path), p], run_dir)
    names = [p + "h1", p + "h2"] if script == "labhosts" else []
    killed = None
    try:
        m = out.wait_for(r"ready ?(\d*)", 180)
        time.sleep(0.5)               # iperf3 -D has daemonized
        extra = [int(m.group(1))] if m.group(1) else []
        killed = Killed(proc, run_dir, names=names, pids=extra)
        if script != "switch":
            assert "iperf3" in {_comm(p) for p in killed.pids}, killed.pids
        if script == "labhosts":
            killed.links = [l for l in links() if l.startswith(p)]
            assert len(killed.links) == 2, killed.links
        took = killed.assert_all_gone(killed.kill())
        print(f"{script}: gone {took:.1f} s after the SIGKILL")
        assert killed.records, f"{script}: no lab record"    # what the reaper went by
        live.assert_untouched()
    finally:
        (killed or Killed(proc, run_dir, names=names)).cleanup()
        for link in links():
            if link.startswith(p):
                subprocess.run(["ip", "link", "delete", link], capture_output=True)


_COOKIE = ("import socket, sys; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
           "print(int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), sys.byteorder))")


def _cookie(name: str) -> int:
    """The kernel's cookie of namespace `name` (SO_NETNS_COOKIE of a socket made in it): unlike
    its inode number, never given to another namespace before the next boot."""
    r = subprocess.run(["ip", "netns", "exec", name, sys.executable, "-c", _COOKIE],
                       capture_output=True, text=True, check=True)
    return int(r.stdout)


def test_a_name_taken_again_by_a_live_lab_is_not_removed_with_the_dead_one(tmp_path, monkeypatch):
    """A LabHost's namespace has its user's name, not one made from a lab token: a record of a
    dead owner lists it with the namespace's kernel cookie, and a namespace of the same name made
    later (the user's next run, alive) is not the dead lab's. The cleaner (the reaper, `lab
    clean`) leaves it and what runs in it, also a process with a pid the record lists (a pid
    used again); the dead one's namespace, still holding the name, goes."""
    _need_root()
    from p4netem.lab import PREFIX, clean_dead_labs, unique_token
    from p4netem.lab.owner import Owner

    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path))
    p = _name_prefix()
    reused, dead = p + "r", p + "d"
    me = Owner.current()
    prefix = f"{PREFIX}{unique_token()}"
    sleeper = None
    try:
        # The dead lab's namespace, then its name taken by another (live) one.
        subprocess.run(["ip", "netns", "add", reused], check=True)
        old_cookie = _cookie(reused)
        subprocess.run(["ip", "netns", "delete", reused], check=True)
        subprocess.run(["ip", "netns", "add", reused], check=True)
        assert _cookie(reused) != old_cookie
        subprocess.run(["ip", "netns", "add", dead], check=True)
        sleeper = subprocess.Popen(["ip", "netns", "exec", reused, "sleep", "300"])
        deadline = time.monotonic() + 10
        while not _ns_pids([reused]) and time.monotonic() < deadline:
            time.sleep(0.05)
        # This pid with another start time: a dead process's record.
        (tmp_path / f"{prefix}.json").write_text(json.dumps({
            "prefix": prefix, "owner": {"pid": me.pid, "start": me.start + 1, "boot": me.boot},
            "kind": "labhost", "namespaces": [reused, dead], "links": [],
            # Its switch's pid, now the live namespace's sleeper's (another start time).
            "processes": [{"pid": sleeper.pid, "start": start_ticks(sleeper.pid) + 1}],
            "netns_ids": {reused: old_cookie, dead: _cookie(dead)}}))
        report = clean_dead_labs()
        assert [lab.prefix for lab in report.cleaned] == [prefix], report
        names = netns_names()
        assert reused in names and dead not in names, names
        assert start_ticks(sleeper.pid) is not None, "the live namespace's process was killed"
        assert report.cleaned[0].namespaces == [dead]
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
        for name in (reused, dead):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def test_a_reaper_does_not_keep_its_owners_niceness():
    """A Ray worker runs at niceness 15, and its reaper inherited it: on a busy node the reaper
    could wait past a minute for the CPU it needs once its owner was killed, while the lab stayed
    (CI95: still there 90 s after Ray killed the worker). The reaper of an owner at 15 runs at 0."""
    owner = subprocess.Popen(
        ["nice", "-n", "15", sys.executable, "-c",
         "import sys; from p4netem.lab import reaper; reaper.watch_this_process(); print('watched', flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline() == "watched\n"
        assert os.getpriority(os.PRIO_PROCESS, owner.pid) == 15
        deadline = time.monotonic() + 30
        reapers = _reapers(owner.pid)
        while time.monotonic() < deadline:
            reapers = _reapers(owner.pid)
            if reapers and all(os.getpriority(os.PRIO_PROCESS, p) == 0 for p in reapers):
                break
            time.sleep(0.1)
        assert len(reapers) == 1, reapers
        assert os.getpriority(os.PRIO_PROCESS, reapers[0]) == 0
    finally:
        owner.stdin.close()
        owner.wait(30)
    assert_gone("p4n-no-lab-", reapers, timeout=30)  # the reaper ends with its owner


def test_a_reaper_acts_once_its_owners_main_thread_has_ended():
    """The reaper waited for every thread of its owner to exit (its pidfd) while every other
    cleaner (the next lab's start, `lab clean`) takes the owner for dead once its main thread is a
    zombie: a thread slow to exit kept the lab. Here the owner's main thread exits alone (the
    `exit` system call, not `exit_group`) and another of its threads lives on: the reaper ends
    all the same, after it has cleaned (nothing: this owner made no lab)."""
    owner = subprocess.Popen(
        [sys.executable, "-c",
         "import ctypes, sys, threading, time\n"
         "from p4netem.lab import reaper\n"
         "reaper.watch_this_process()\n"
         "threading.Thread(target=time.sleep, args=(300,), daemon=True).start()\n"
         "print('watched', flush=True)\n"
         "sys.stdin.readline()\n"
         "ctypes.CDLL(None, use_errno=True).syscall(60, 0)  # SYS_exit (x86-64): this thread only\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline() == "watched\n"
        reapers = _reapers(owner.pid)
        assert len(reapers) == 1, reapers
        owner.stdin.write("go\n")
        owner.stdin.flush()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and start_ticks(owner.pid) is not None:
            time.sleep(0.05)
        assert start_ticks(owner.pid) is None, "the owner's main thread did not end"
        # Its other thread still runs: the pidfd is not readable yet.
        assert len(os.listdir(f"/proc/{owner.pid}/task")) >= 2, os.listdir(f"/proc/{owner.pid}/task")
        assert_gone("p4n-no-lab-", reapers, timeout=30)
    finally:
        owner.kill()
        owner.wait(30)
