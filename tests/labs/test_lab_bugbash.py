"""`p4netem lab` as a test engineer uses it, and how it refuses what it cannot run.

- Topology files: a name the lab's switch or CLI already uses, an address that is no host's or a
  group that counts past 255.255.255.255, more hosts than the switch has ports, a name that is
  Rich markup: each an `error:` naming the file and the field, before any namespace is made (the
  run dir stays empty). `lab list` lists the good files and names the bad ones.
- `--profile`/`--link-profile` errors name the option.
- A lab's close touches only its own names, never another lab's whose token extends its own; a
  close that fails does not hide why the start failed; a switch that answers late (a big lab's,
  bringing its ports up) is waited for.
- `lab up --cmd` with standard input at its end (CI, scripts) does not spin a core while a host
  command runs; Ctrl-C ends the script (exit 130, the later lines not run, the lab removed), and
  a second Ctrl-C waits for the close.
- The dumbbell example of docs/labs.md works as written.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from p4netem.lab.netns import unique_token
from p4netem.lab.owner import links, netns_names
from p4netem_studies.mininet.topology import (RESERVED_NAMES, TopologyError, TopologySpec,
                                              load_topology)
from child_signals import default_sigint
from lab_env import assert_gone

P4NETEM = str(Path(sys.executable).parent / "p4netem")

HOSTS = "  - {name: client, role: client, ip: 10.0.0.1}\n  - {name: server, role: server, ip: 10.0.1.1}\n"


def _p4netem(*args: str, run_dir: Path, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    full = {**os.environ, "COLUMNS": "300", "P4NETEM_RUN_DIR": str(run_dir), **(env or {})}
    return subprocess.run([P4NETEM, *args], capture_output=True, text=True, timeout=180, env=full, **kw)


# ---- topology files: refused before any namespace, naming the file and the field ---------------

HOSTILE = {
    # The lab's switch is Mininet node `s1`: a host of that name made the build fail halfway
    # ("sysctl: cannot stat /proc/sys/net/ipv6/conf/p4n...p1/disable_ipv6").
    "switch-name": ("name: t\nhosts:\n  - {name: s1, role: client, ip: 10.0.0.1}\n"
                    "  - {name: server, role: server, ip: 10.0.1.1}\n",
                    r"hosts\.0\.name: .*'s1' is the name of the lab's switch"),
    # A group `s` of two is s1 and s2.
    "switch-name-expanded": ("name: t\nhosts:\n  - {name: s, role: client, ip: 10.0.0.1, count: 2}\n"
                             "  - {name: server, role: server, ip: 10.0.1.1}\n",
                             r"topology 't': host 's1' \(group 's'\) is the name of the lab's switch"),
    # `py ping ...` runs Mininet's py command: a host named py was out of reach of the CLI.
    "cli-command": ("name: t\nhosts:\n  - {name: client, role: client, ip: 10.0.0.1}\n"
                    "  - {name: py, role: server, ip: 10.0.1.1}\n",
                    r"hosts\.1\.name: .*'py' is a command of the lab's CLI"),
    # ip + count past the last address: a traceback (AddressValueError).
    "address-overflow": ("name: t\nprefix_len: 8\nhosts:\n"
                         "  - {name: client, role: client, ip: 255.255.255.250, count: 10}\n"
                         "  - {name: server, role: server, ip: 255.255.255.1}\n",
                         r"hosts\.0 \('client'\): 10 addresses from 255\.255\.255\.250 run past "
                         r"255\.255\.255\.255"),
    # Loopback and multicast addresses came up as a lab whose pings fail (EINVAL, no route).
    "loopback": ("name: t\nprefix_len: 24\nhosts:\n  - {name: client, role: client, ip: 127.0.0.1}\n"
                 "  - {name: server, role: server, ip: 127.0.0.2}\n",
                 r"hosts\.0\.ip: .*127\.0\.0\.1 is in 127\.0\.0\.0/8, which holds no host addresses"),
    "multicast": ("name: t\nprefix_len: 24\nhosts:\n  - {name: client, role: client, ip: 224.0.0.1}\n"
                  "  - {name: server, role: server, ip: 224.0.0.2}\n",
                  r"hosts\.0\.ip: .*224\.0\.0\.0/4, which holds no host addresses"),
    # 511 hosts: every namespace and shell was built (more than 10 minutes here) before the switch
    # refused port 510 (its CPU port).
    "too-many-hosts": ("name: t\nhosts:\n  - {name: ue, role: client, ip: 10.0.0.1, count: 510}\n"
                       "  - {name: server, role: server, ip: 10.0.100.1}\n",
                       r"topology 't': 511 hosts \(ue 510, server 1\), at most 509: each host takes "
                       r"a switch port"),
    # Rich markup in the name: a MarkupError traceback from the table's title.
    "markup-name": ("name: '[/bold]'\nhosts:\n" + HOSTS,
                    r"name: .*'\[/bold\]' is not a topology name"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_topology_file_is_refused_naming_the_file_and_field(case, tmp_path):
    text, pattern = HOSTILE[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    with pytest.raises(TopologyError) as exc:
        load_topology(path).expand()
    assert str(exc.value).startswith(f"{path}: "), exc.value      # the file, then the field
    assert re.search(pattern, str(exc.value)), exc.value


def test_lab_up_refuses_a_hostile_file_before_any_namespace(tmp_path):
    """Through the CLI: one `error:` paragraph on stderr, exit 1, no traceback, and no lab was
    recorded (a MininetLab records itself before it builds anything)."""
    run_dir = tmp_path / "run"
    for case in ("switch-name", "address-overflow", "too-many-hosts", "markup-name"):
        path = tmp_path / f"{case}.yaml"
        path.write_text(HOSTILE[case][0])
        r = _p4netem("lab", "up", str(path), "--cmd", "client true", run_dir=run_dir)
        assert r.returncode == 1 and r.stderr.startswith(f"error: {path}: "), (case, r.stderr)
        assert "Traceback" not in r.stderr and r.stdout == "", (case, r.stdout, r.stderr)
        assert re.search(HOSTILE[case][1], r.stderr), (case, r.stderr)
        assert not run_dir.exists() or not list(run_dir.iterdir()), case


def test_the_reserved_names_are_the_lab_cli_s_commands():
    """The list in topology.py (which imports no Mininet) is what the CLI really runs instead of a
    host command: every do_* of LabCLI, Mininet's included, and the switch node."""
    from p4netem_studies.mininet.cli import LabCLI
    commands = {name[3:] for name in dir(LabCLI) if name.startswith("do_")} - {"EOF"}
    assert commands <= RESERVED_NAMES and RESERVED_NAMES - commands == {"s1"}


def test_relocating_past_the_last_address_is_an_error():
    spec = TopologySpec.model_validate({"name": "t", "prefix_len": 30, "hosts": [
        {"name": "client", "role": "client", "ip": "255.255.255.253"},
        {"name": "server", "role": "server", "ip": "255.255.255.254"}]})
    with pytest.raises(TopologyError, match="lab 1 would move its hosts past 255.255.255.255"):
        spec.expand().relocated(1)


def test_a_missing_topology_file_is_named_as_a_file(tmp_path):
    with pytest.raises(TopologyError, match=r"^no topology file '.*/nope\.yaml'; known: .*inline"):
        load_topology(tmp_path / "nope.yaml")


def test_lab_list_names_a_broken_file_and_lists_the_others(tmp_path):
    topos = tmp_path / "topologies"
    topos.mkdir()
    (topos / "good.yaml").write_text("name: good\ndescription: '[bold]literal[/bold] text'\nhosts:\n" + HOSTS)
    (topos / "broken.yaml").write_text("name: broken\nhosts: [\n")
    r = _p4netem("lab", "list", run_dir=tmp_path / "run", env={"P4NETEM_TOPOLOGIES": str(topos)})
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"error: {topos / 'broken.yaml'}: line 3"), r.stderr
    assert "[bold]literal[/bold] text" in r.stdout, r.stdout     # shown as written, not as markup


def test_profile_errors_name_the_option(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nboth: {rate: fast}\n")
    run_dir = tmp_path / "run"
    r = _p4netem("lab", "up", "inline", "--profile", str(bad), "--cmd", "client true", run_dir=run_dir)
    assert r.returncode == 1 and r.stderr.startswith(f"error: --profile: {bad}: both.rate: "), r.stderr
    r = _p4netem("lab", "up", "dumbbell", "--link-profile", "nope", "--cmd", "client1 true", run_dir=run_dir)
    assert r.returncode == 1 and r.stderr.startswith("error: --link-profile: no built-in profile "
                                                     "or file 'nope'"), r.stderr


# ---- labs side by side --------------------------------------------------------------------------

def test_closing_a_lab_leaves_a_lab_whose_token_extends_its_own(switch_bin, tmp_path, monkeypatch):
    """Tokens are a base-36 pid then a counter, so one can begin another (`2s1`, and `2s10`: pid
    100's second lab and pid 3601's first, or one process's second and 37th). close() swept every
    namespace starting with its prefix: lab A's close deleted lab B's hosts."""
    from p4netem_studies.mininet.lab import MininetLab
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    base = unique_token()
    topo = load_topology("inline").expand()
    b = MininetLab(topo, binary=switch_bin)
    b.token = f"{base}Q1"       # upper case: never a unique_token's, so no other lab's name
    a = MininetLab(topo, binary=switch_bin)
    a.token = f"{base}Q"        # a prefix of every name of lab b
    with b:
        assert a.leftovers() == {}
        a.close()
        assert {b.ns("client"), b.ns("server")} <= set(netns_names())
        assert b._switch_intf(1) in links()
        b.run("client", ["ping", "-c", "1", "-W", "5", b.ip("server")])
    assert_gone(b.prefix, [])


def test_a_failing_close_does_not_hide_why_the_start_failed(tmp_path, monkeypatch):
    """A start that fails closes the lab; when that close failed too (a 511-host lab: its switch
    would not stop in time), its error replaced the start's, and `lab up` said only "lab cleanup:
    mininet stop: ... timed out", never why the lab did not come up."""
    from mininet.net import Mininet

    from p4netem.lab.netns import LabError
    from p4netem_studies.mininet.lab import MininetLab
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    real_stop = Mininet.stop

    def stop_then_fail(net):
        real_stop(net)
        raise RuntimeError("the stop failed too")
    monkeypatch.setattr(Mininet, "stop", stop_then_fail)
    lab = MininetLab(load_topology("inline").expand(), binary=tmp_path / "no-such-switch")
    with pytest.raises(LabError, match="no-such-switch not found"):
        lab.start()
    assert lab.leftovers() == {}
    assert_gone(lab.prefix, [])


SLOW_SWITCH = """#!{python}
# The real switch, as a big lab's is: listening at once, answering P4Runtime {delay} s later (it
# brings its ports up one after the other first: 12 s for 151 ports on this machine).
import os, socket, sys, time
args = sys.argv[1:]
host, port = args[args.index("--grpc-addr") + 1].rsplit(":", 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, int(port)))
s.listen()
time.sleep({delay})
s.close()
os.execv({binary!r}, [{binary!r}, *args])
"""


def test_a_switch_that_answers_late_is_waited_for(switch_bin, tmp_path, monkeypatch):
    """A lab waited 10 s (the P4Runtime client's default) for its switch to answer: a lab of 151
    hosts failed here with "UNAVAILABLE: no P4Runtime server answers" (and `lab up` with a
    traceback) while its switch was still bringing its ports up."""
    from p4netem_studies.mininet.lab import MininetLab
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    wrapper = tmp_path / "slow-switch"
    wrapper.write_text(SLOW_SWITCH.format(python=sys.executable, delay=12, binary=switch_bin))
    wrapper.chmod(0o755)
    with MininetLab(load_topology("inline").expand(), binary=wrapper) as lab:
        lab.run("client", ["ping", "-c", "1", "-W", "5", lab.ip("server")])
    assert_gone(lab.prefix, [])


# ---- lab up --cmd: standard input at its end, Ctrl-C -------------------------------------------

def _poll_calls(pid: int, seconds: float) -> int:
    """poll() calls of the process's main thread during `seconds` (strace -c attached to it)."""
    st = subprocess.Popen(["strace", "-qq", "-c", "-e", "trace=poll,ppoll", "-p", str(pid)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    st.send_signal(signal.SIGINT)
    _, report = st.communicate(timeout=30)
    calls = [int(line.split()[3]) for line in report.splitlines()
             if line.split()[-1:] in (["poll"], ["ppoll"]) and line.split()[3].isdigit()]
    return sum(calls)


class _Lines:
    def __init__(self, proc: subprocess.Popen):
        self.text = ""
        self._t = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._t.start()

    def _read(self, proc) -> None:
        for line in proc.stdout:
            self.text += line

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text)
            if m:
                return m
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in:\n{self.text}")


def test_a_host_command_with_stdin_at_its_end_does_not_spin(tmp_path):
    """Mininet polls standard input beside the command's output; at its end (</dev/null: CI,
    scripts) poll() returned at once, forever: a core spun while `client sleep` ran (hundreds of
    thousands of poll calls in 3 s, 9 s of CPU for a 10 s sleep)."""
    proc = subprocess.Popen([P4NETEM, "lab", "up", "inline", "--cmd", "client sleep 6"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "COLUMNS": "200",
                                            "P4NETEM_RUN_DIR": str(tmp_path / "run")})
    try:
        out = _Lines(proc)
        out.wait_for(r"switch: p4netem gRPC")
        time.sleep(1)          # the sleep is running in the client
        calls = _poll_calls(proc.pid, 3)
        assert proc.wait(120) == 0, out.text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert calls < 1000, calls     # a few per output line and key; the old loop made >100,000


def _lab_running_a_command(tmp_path, host: str, *args: str) -> tuple[subprocess.Popen, _Lines, str]:
    """`p4netem lab up ARGS` (SIGINT at its default), once its switch is up and a second more for
    the first --cmd to run: the process, its output lines and the lab's prefix (read from the name
    of `host`'s namespace). A process that does not get there is killed."""
    proc = subprocess.Popen(default_sigint([P4NETEM, "lab", "up", *args]),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "200", "P4NETEM_RUN_DIR": str(tmp_path / "run")})
    try:
        out = _Lines(proc)
        prefix = out.wait_for(rf"(p4n[0-9a-z]+){host}").group(1)
        out.wait_for(r"switch: p4netem gRPC")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    time.sleep(1)
    return proc, out, prefix


def test_ctrl_c_ends_a_cmd_script(tmp_path):
    """Ctrl-C during `lab up --cmd` stops the script as a shell script stops: the running command
    is interrupted, the lines after it do not run, the lab is removed, exit 130. Before, Mininet
    interrupted the command only and went on with the next line (exit 1, "exited with status
    130")."""
    mark = tmp_path / "after"
    proc, out, prefix = _lab_running_a_command(tmp_path, "client", "inline", "--cmd", "client sleep 60",
                                               "--cmd", f"client touch {mark}")
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130, out.text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "interrupted: lab removed" in out.text and "exited with status" not in out.text, out.text
    assert not mark.exists()
    assert_gone(prefix, [])


def test_a_second_ctrl_c_waits_for_the_close(tmp_path):
    """An impatient second Ctrl-C came during the lab's close and cut it short: every namespace
    was left behind (until the next run's or `lab clean`'s sweep), and `lab up` printed
    "interrupted: lab removed" all the same. Now it waits for the close. (On a machine that closes
    the lab within the 0.2 s the second one may find the process already exiting, where Python
    restores the default SIGINT: then it ends by the signal, its lab gone all the same.)"""
    proc, out, prefix = _lab_running_a_command(tmp_path, "ue1", "cellular", "-p", "ues=12", "--cmd", "ue1 sleep 60")
    try:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) in (130, -signal.SIGINT), out.text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_gone(prefix, [])
    assert not list((tmp_path / "run").glob("*.json"))     # closed by itself, not left to a sweep


# ---- the documented examples -------------------------------------------------------------------

def test_the_dumbbell_example_of_the_docs_works_as_written(tmp_path):
    doc = (Path(__file__).parents[2] / "docs" / "labs.md").read_text()
    assert ('p4netem lab up dumbbell -p pairs=2 --profile t1 --link-profile lan \\\n'
            '        --cmd "client1 ping -c 2 10.0.1.2"') in doc
    r = _p4netem("lab", "up", "dumbbell", "-p", "pairs=2", "--profile", "t1", "--link-profile", "lan",
                 "--cmd", "client1 ping -c 2 10.0.1.2", run_dir=tmp_path / "run")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stderr.count("ttl=62") == 2, r.stderr     # through both routers
