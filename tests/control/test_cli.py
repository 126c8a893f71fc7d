"""The `p4netem` command line, run as users run it (.venv/bin/p4netem in a subprocess) against a
real p4netem-switch: apply/show/stats/reset, timelines, the `switch` command with Ctrl-C, and the
exit codes and messages scripts rely on (docs/cli.md, p4netem.cli)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from p4netem.control import Controller
from p4netem.lab import SwitchProcess, TwoHostLab, free_tcp_port
from child_signals import default_sigint, sigint_ignored
from pings import ping

P4NETEM = Path(sys.executable).parent / "p4netem"


def cli(*args: str, addr: str | None = None, timeout: float = 60,
        env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """Run p4netem with stdout a pipe; `env` adds variables (a None value removes one, e.g. COLUMNS)."""
    env = {k: v for k, v in {**os.environ, "COLUMNS": "160", **(env or {})}.items() if v is not None}
    if addr:
        env["P4NETEM_ADDR"] = addr
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=timeout, env=env)


@contextmanager
def commands() -> Iterator[Callable[..., Future[subprocess.CompletedProcess[str]]]]:
    """start(*args, **kw): cli(*args, **kw) started beside the others of the block, two at a time
    (each is a new interpreter, most of its half second CPU: one a core); every one has ended when
    the block does. For commands whose order does not matter (reads, refusals that write nothing)."""
    with ThreadPoolExecutor(2) as pool:
        yield lambda *args, **kw: pool.submit(cli, *args, **kw)


def rtt_ms(lab: TwoHostLab, count: int = 5) -> float:
    out = lab.h1.ns.run(["ping", "-n", "-c", str(count), "-i", "0.2", lab.h2.ip]).stdout
    m = re.search(r"= [\d.]+/([\d.]+)/", out)
    assert m, out
    return float(m.group(1))


def test_apply_show_stats_reset(lab: TwoHostLab) -> None:
    addr = lab.switch.grpc_addr
    # The lab's own client holds election id 1: a second controller with the same id is refused
    # (at once with no --primary-wait; tests/control/test_primary_wait.py has the wait).
    same = cli("apply", "hspa", addr=addr, env={"P4NETEM_PRIMARY_WAIT": "0"})
    assert same.returncode == 3, same.stderr
    assert same.stderr.startswith(f"error: switch {addr}: INVALID_ARGUMENT"), same.stderr

    r = cli("apply", "hspa", "--election-id", "2", addr=addr)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("applied hspa to 1 rule(s): 0 switched, 1 added"), r.stdout
    assert "downlink: rate 3Mbit, delay 50ms, jitter 3.54ms normal" in r.stdout
    assert r.stderr == ""
    assert rtt_ms(lab) >= 100  # 50 ms each way (and the first pings wait for the radio)

    shown = json.loads(cli("show", "--json", addr=addr).stdout)
    (rule,) = shown["rules"]
    assert rule["profile"] == "hspa" and rule["downlink"]["rate"] == "3Mbit" and rule["modified"] == []
    assert rule["radio"]["model"] == "umts" and rule["radio"]["promotion_idle_dch"] == "1.8s"
    # Added above the lab's own (unmanaged) port entries, which have priority 10.
    assert rule["rule"] == {"client": {"switch_port": 1}, "server": {"switch_port": 2}, "priority": 11}
    assert shown["port_map"] == {"1": 2, "2": 1}

    stats = json.loads(cli("stats", "--json", addr=addr).stdout)
    rows = {(row["label"], row["direction"]): row for row in stats["rows"]}
    assert rows[("#1", "uplink")]["packets_in"] >= 5 and rows[("#1", "downlink")]["packets_out"] >= 5
    assert rows[("#1", "uplink")]["profile"] == "hspa"
    # hspa's radio is on the switch: the rule's UE (0) woke up once for the pings.
    (ue,) = stats["radio"]["ues"]
    assert (ue["ue"], ue["rules"], ue["model"], ue["state"]) == (0, ["#1"], "umts", "DCH"), ue
    assert ue["promotions"] == {"idle_dch": 1} and ue["time_in_state_s"]["promoting"] == 1.8, ue
    table = cli("stats", "--once", addr=addr)
    assert table.returncode == 0 and "drops by reason" in table.stdout and "hspa" in table.stdout
    assert "radio per UE" in table.stdout and "IDLE->DCH 1" in table.stdout, table.stdout

    switched = json.loads(cli("apply", "lan", "--election-id", "2", "--json", addr=addr).stdout)
    assert (switched["added"], switched["switched"]) == (0, 1) and switched["rules"][0]["profile"] == "lan"
    assert rtt_ms(lab) < 20
    # The counters of rule 1 kept counting across the switch.
    again = {(row["label"], row["direction"]): row for row in json.loads(cli("stats", "--json", addr=addr).stdout)["rows"]}
    assert again[("#1", "uplink")]["packets_in"] >= rows[("#1", "uplink")]["packets_in"] + 5

    r = cli("reset", "--election-id", "2", addr=addr)
    assert r.returncode == 0 and r.stdout.startswith("reset:"), r.stdout + r.stderr
    assert json.loads(cli("show", "--json", addr=addr).stdout)["rules"] == []


def test_hard_reset_keeps_the_wire_and_port_map_sets_it(lab: TwoHostLab) -> None:
    addr = lab.switch.grpc_addr
    assert cli("apply", "lte", "--election-id", "2", addr=addr).returncode == 0
    r = cli("reset", "--hard", "--election-id", "2", addr=addr)
    assert r.returncode == 0 and "port map and L2 forwarding written back" in r.stdout, r.stdout + r.stderr
    shown = json.loads(cli("show", "--json", addr=addr).stdout)
    assert shown["rules"] == [] and shown["port_map"] == {"1": 2, "2": 1}, shown
    assert ping(lab.h1, lab.h2, count=3)[1] == 3 and rtt_ms(lab) < 20  # still a wire, and no longer lte's

    r = cli("reset", "--hard", "--port-map", "--election-id", "2", addr=addr)
    assert r.returncode == 0 and "nothing is forwarded" in r.stdout, r.stdout + r.stderr
    assert json.loads(cli("show", "--json", addr=addr).stdout)["port_map"] == {}
    assert ping(lab.h1, lab.h2, count=3)[1] == 0

    r = cli("port-map", "1:2,2:1", "--election-id", "2", addr=addr)
    assert r.returncode == 0 and r.stdout.strip() == "port map 1 -> 2, 2 -> 1", r.stdout + r.stderr
    assert ping(lab.h1, lab.h2, count=3)[1] == 3
    bad = cli("port-map", "1:2,1:3", "--election-id", "2", addr=addr)
    assert bad.returncode == 2 and "port 1 is given twice" in bad.stderr, bad.stderr


def test_exit_codes_and_messages(bare_switch: SwitchProcess, tmp_path) -> None:
    # A switch that does not answer (checked last): the command waits out its 5-s connect timeout,
    # so it runs beside the others (it touches no switch of theirs) instead of before them.
    unreachable = subprocess.Popen([str(P4NETEM), "apply", "lan", "--switch", "127.0.0.1:1"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "COLUMNS": "160"})
    try:
        _exit_codes_and_messages(bare_switch.grpc_addr, tmp_path)
        _, err = unreachable.communicate(timeout=60)
    finally:
        if unreachable.poll() is None:
            unreachable.kill()
            unreachable.wait()
    assert unreachable.returncode == 3 and err.startswith("error: switch 127.0.0.1:1: UNAVAILABLE"), err


def _exit_codes_and_messages(addr: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nuplink: {loss: 150%}\n")
    # Values are quoted as given, never read as markup, and a pipe does not wrap the message.
    marked = tmp_path / "marked.yaml"
    marked.write_text('name: "[bold]x"\nuplink: {loss: 1%, delay: "' + "9" * 60 + 'min"}\n')
    # Ids beyond what P4Runtime carries (uint128 election id, uint64 device id) are usage errors
    # naming the option and its range, from the option or its environment variable, never a
    # traceback from encoding the request (issue 13, defect 2).
    huge = str(2**128 + 1)
    # Commands that fail before they write anything, their results checked in order below.
    with commands() as start:
        bad_profile = start("apply", str(bad), addr=addr)
        bad_rule = start("apply", "lan", "--rule", "client=10.0.0.1,dscp=99", addr=addr)
        invalid = start("profiles", "validate", str(bad))
        bad_profile_no_switch = start("apply", str(bad), "--switch", "127.0.0.1:1")
        quoted = start("profiles", "validate", str(marked), env={"COLUMNS": None})
        no_profile = start("apply")
        huge_ids = [start("apply", "lan", *args, addr=addr, env=env)
                    for args, env in ((("--election-id", huge), {}), ((), {"P4NETEM_ELECTION_ID": huge}))]
        huge_device = start("show", "--device-id", str(2**64), addr=addr)
        unknown_option = start("apply", "lan", "--no-such-option")
        zero_interval = start("stats", "--interval", "0")

    r = bad_profile.result()
    assert r.returncode == 1 and "uplink.loss: 150% out of range 0..100%" in r.stderr, r.stderr
    r = bad_rule.result()
    assert r.returncode == 1 and "dscp: 99 out of range 0..63" in r.stderr, r.stderr
    r = invalid.result()
    assert r.returncode == 1 and r.stderr.startswith(f"error: {bad}: invalid"), r.stderr
    # The profile file is read before the switch is: a bad file is exit 1 even with no switch there.
    r = bad_profile_no_switch.result()
    assert r.returncode == 1 and "uplink.loss: 150% out of range" in r.stderr, r.stderr
    r = quoted.result()
    assert r.returncode == 1 and '"[bold]x"' in r.stderr, r.stderr
    assert any(line.strip().startswith("uplink.delay:") and line.endswith("allowed 0s..281474.976710655s")
               for line in r.stderr.splitlines()), r.stderr

    assert no_profile.result().returncode == 2
    for f in huge_ids:
        r = f.result()
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "'--election-id'" in r.stderr and "less than or equal to 340282366920938463463374607431768211455" \
            in " ".join(r.stderr.replace("│", " ").split()), r.stderr
    r = huge_device.result()
    assert r.returncode == 2 and "'--device-id'" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert unknown_option.result().returncode == 2
    assert zero_interval.result().returncode == 2

    with Controller.connect(addr, election_id=10):
        r = cli("apply", "lan", "--election-id", "5", addr=addr, env={"P4NETEM_PRIMARY_WAIT": "0"})
        assert r.returncode == 3, r.stderr
        assert "PERMISSION_DENIED" in r.stderr and "not the primary controller" in r.stderr
        assert "pass a higher --election-id" in r.stderr
        # Reads need no election.
        assert cli("show", addr=addr).returncode == 0
    assert json.loads(cli("show", "--json", addr=addr).stdout)["rules"] == []  # nothing was written


def test_timeline_run_and_check(bare_switch: SwitchProcess, tmp_path) -> None:
    addr = bare_switch.grpc_addr
    good = tmp_path / "good.yaml"
    (tmp_path / "slow-wan.yaml").write_text("name: slow-wan\nboth: {delay: 40ms, rate: 5Mbit}\n")
    good.write_text("""
name: short
steps:
  - apply: lan
  - {at: 100ms, apply: slow-wan.yaml}   # a file next to the timeline
  - {at: 200ms, set: {downlink.rate: 1Mbit}}
  - {at: 300ms, outage: 100ms}
""")
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  - apply: lan\n  - {at: 1s, set: {downlink.rate: fast}}\n")
    ran = cli("timeline", "run", str(good), "--json", addr=addr)  # alone: its changes are timed
    with commands() as start:  # the checks (no switch) and reads after it
        checked, bad_checked = start("timeline", "check", str(good)), start("timeline", "check", str(bad))
        nameless = start("show", "--json", addr=addr)
        named = start("show", "--json", "--profiles", str(tmp_path / "slow-wan.yaml"), addr=addr)
    r = checked.result()
    assert r.returncode == 0 and "ok, 5 changes over 400ms" in r.stdout, r.stdout + r.stderr
    r = ran
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [e["at_ms"] for e in out["events"]] == [0, 100, 200, 300, 400]
    assert out["events"][-1]["action"] == "end of outage, back to slow-wan"
    assert all(0 <= e["error_ms"] < 100 for e in out["events"]), out
    # The switch holds no names: a profile from a file is shown by name when the file is given.
    assert json.loads(nameless.result().stdout)["rules"][0]["profile"] is None
    shown = json.loads(named.result().stdout)
    rule = shown["rules"][0]
    assert rule["profile"] == "slow-wan" and rule["modified"] == ["downlink.rate: 5Mbit -> 1Mbit"]

    for r in (bad_checked.result(), cli("timeline", "run", str(bad), addr=addr)):
        assert r.returncode == 1 and 'steps[1].set.downlink.rate: "fast" is not a rate' in r.stderr, r.stderr
    with commands() as start:
        again = start("show", "--json", "--profiles", str(tmp_path / "slow-wan.yaml"), addr=addr)
        by_timeline = start("show", "--json", "--profiles", str(good), addr=addr)
    # The failed run wrote nothing: the switch still has what the good run left.
    assert json.loads(again.result().stdout) == shown
    # --profiles takes the timeline file too: the profile files its steps apply ...
    assert json.loads(by_timeline.result().stdout) == shown

    # ... and its inline profiles, which the hint of `show` leads to (a top-level name, profiles
    # and steps are a timeline, not an unknown key next to `profiles:`).
    handover = tmp_path / "handover.yaml"
    handover.write_text("name: handover\nprofiles:\n  - {name: weak-cell, both: {delay: 80ms, loss: 2%}}\n"
                        "steps:\n  - apply: lte\n  - {at: 100ms, apply: weak-cell}\n")
    assert cli("timeline", "run", str(handover), addr=addr).returncode == 0
    # A timeline's problems name its field, as `timeline check` does.
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: b\nprofiles: [{name: x, uplink: {loss: 150%}}]\nsteps: [{apply: x}]\n")
    with commands() as start:  # reads only, from here on
        plain = start("show", addr=addr)
        with_file = [(command, start(*command, "--profiles", str(handover), addr=addr))
                     for command in (("show",), ("stats", "--once"), ("radio", "show"),
                                     ("timeline", "check", str(handover)))]
        shown_json = start("show", "--json", "--profiles", str(handover), addr=addr)
        shown_broken = start("show", "--profiles", str(broken), addr=addr)
    r = plain.result()
    assert "#1: profile not built-in" in r.stdout and "pass its file (profile or timeline) with --profiles" in r.stdout
    for command, f in with_file:
        r = f.result()
        assert r.returncode == 0, (command, r.stderr)
    r = with_file[0][1].result()
    assert "weak-cell" in r.stdout and "not built-in" not in r.stdout, r.stdout
    rule = json.loads(shown_json.result().stdout)["rules"][0]
    assert rule["profile"] == "weak-cell" and rule["modified"] == []
    r = shown_broken.result()
    assert r.returncode == 1 and r.stderr.startswith("error: ") and \
        "profiles[0].uplink.loss: 150% out of range" in r.stderr, r.stderr


def test_piped_output_is_wide_and_watch_prints_every_refresh(bare_switch: SwitchProcess) -> None:
    """Stdout a pipe and no COLUMNS: tables are not squeezed into 80 columns (whole headers and
    cells); an explicit COLUMNS is kept. `stats --watch` into a pipe prints every refresh."""
    addr = bare_switch.grpc_addr
    assert cli("apply", "hspa", "--rule", "client=10.0.0.1,ue=1", addr=addr).returncode == 0
    wide = {"COLUMNS": None}
    r = cli("show", addr=addr, env=wide)
    assert r.returncode == 0 and "…" not in r.stdout, r.stdout
    header = next(line for line in r.stdout.splitlines() if "traffic" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "#", "traffic", "ue", "prio", "profile", "downlink", "uplink", "radio", "ids"], header
    assert "rate 3Mbit, delay 50ms, jitter 3.54ms normal" in r.stdout  # a cell on one line
    r = cli("stats", "--once", addr=addr, env=wide)
    assert r.returncode == 0 and "…" not in r.stdout, r.stdout
    assert "drops by reason" in r.stdout and "Mbit/s out" in r.stdout and "hspa" in r.stdout
    # COLUMNS given: rich's width, as before.
    narrow = cli("show", addr=addr, env={"COLUMNS": "80"})
    assert narrow.returncode == 0 and max(len(line) for line in narrow.stdout.splitlines()[1:]) <= 80

    r = cli("stats", "--watch", "--count", "3", "--interval", "0.2", addr=addr, env=wide)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("p4netem counters") == 3 and r.stdout.count("drops by reason") == 3, r.stdout


def _port_open(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def test_switch_command_runs_in_the_foreground_and_stops_on_ctrl_c(switch_bin: str) -> None:
    if os.geteuid() != 0:
        pytest.fail("needs root", pytrace=False)
    hosts = TwoHostLab()
    try:
        hosts._build_hosts()  # namespaces and veths only; the CLI starts the switch
        addr = f"127.0.0.1:{free_tcp_port()}"
        proc = subprocess.Popen(
            default_sigint([str(P4NETEM), "switch", "-i", f"1@{hosts.h1.switch_iface}",
                            "-i", f"2@{hosts.h2.switch_iface}", "--switch", addr, "--binary", switch_bin,
                            "--fix-offloads", "--rt-priority", "0"]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("p4netem-switch running"), line + (proc.stderr.read() if proc.poll() else "")
            assert not sigint_ignored(proc.pid), "the CLI started with SIGINT ignored"
            assert "port map 1->2, 2->1" in line
            assert rtt_ms(hosts, 3) < 20  # forwarding between the two ports
            assert cli("apply", "wan-90ms", addr=addr).returncode == 0
            assert rtt_ms(hosts, 3) >= 90
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err
        assert "p4netem-switch stopped" in out
        assert "SIGINT: shutting down" in err  # the switch's own clean shutdown
        assert not _port_open(addr)

        # An address another process listens on is refused before anything starts.
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = f"127.0.0.1:{taken.getsockname()[1]}"
            r = cli("switch", "--switch", busy, "--binary", switch_bin)
        assert r.returncode == 1 and f"something already listens on {busy}" in r.stderr, r.stderr

        # A `p4netem switch` killed outright (SIGKILL, no chance to clean up) takes its switch along.
        addr = f"127.0.0.1:{free_tcp_port()}"
        proc = subprocess.Popen([str(P4NETEM), "switch", "--switch", addr, "--binary", switch_bin, "--rt-priority", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None and proc.stdout.readline().startswith("p4netem-switch running")
        assert _port_open(addr)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while _port_open(addr) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _port_open(addr), "the switch outlived its p4netem switch process"
        r = cli("switch", "-i", "1@no-such-iface0", "--switch", f"127.0.0.1:{free_tcp_port()}",
                "--binary", switch_bin, "--rt-priority", "0")
        assert r.returncode == 1 and "p4netem-switch exited with code" in r.stderr, r.stderr
    finally:
        hosts.close()


def test_switch_binary_says_its_address_is_in_use(switch_bin: str) -> None:
    """p4netem-switch started on a taken P4Runtime address says so, in one line, before it opens
    any port (issue 13, defect 5: it said `transport error`)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        r = subprocess.run([switch_bin, "--grpc-addr", busy, "--rt-priority", "0", "--grpc-rt-priority", "0"],
                           capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"p4netem-switch: P4Runtime address {busy} is already in use"), r.stderr
    assert "--grpc-addr" in last and "transport error" not in r.stderr


def test_set_and_apply_in_place(bare_switch: SwitchProcess, tmp_path) -> None:
    """`p4netem set FIELD=VALUE` changes the profile a rule has where it is (same profile id),
    keeping the name of a profile this process does not know; `apply --in-place` too; bad
    fields change nothing."""
    addr = bare_switch.grpc_addr
    custom = tmp_path / "custom.yaml"
    custom.write_text("name: custom\nboth: {delay: 40ms, rate: 5Mbit}\n")
    assert cli("apply", str(custom), addr=addr).returncode == 0
    first = json.loads(cli("show", "--json", addr=addr).stdout)["rules"][0]

    r = cli("set", "downlink.rate=1Mbit", "delay=10ms", "--json", addr=addr)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["modified_in_place"], out["switched"], out["added"]) == (1, 0, 0)
    shown = json.loads(cli("show", "--json", "--profiles", str(custom), addr=addr).stdout)["rules"][0]
    assert shown["profile_id"] == first["profile_id"]
    assert shown["profile"] == "custom"
    assert sorted(shown["modified"]) == ["downlink.delay: 40ms -> 10ms", "downlink.rate: 5Mbit -> 1Mbit",
                                         "uplink.delay: 40ms -> 10ms"]

    for args, message in ((("downlink.rate=fast",), 'downlink.rate: "fast" is not a rate'),
                          (("rate",), "rate: expected FIELD=VALUE"),
                          (("downlink.nope=1",), "downlink.nope")):
        r = cli("set", *args, addr=addr)
        assert r.returncode == 1 and message in r.stderr, r.stderr
    assert json.loads(cli("show", "--json", "--profiles", str(custom), addr=addr).stdout)["rules"][0] == shown

    r = cli("set", "downlink.rate=", "--switch-queue", "--json", addr=addr)  # back to the default: no rate
    assert r.returncode == 0 and json.loads(r.stdout)["switched"] == 1, r.stderr
    moved = json.loads(cli("show", "--json", addr=addr).stdout)["rules"][0]
    assert moved["profile_id"] == first["spare_id"] and "rate" not in moved["downlink"]

    r = cli("apply", "lan", "--in-place", "--json", addr=addr)
    assert r.returncode == 0 and json.loads(r.stdout)["modified_in_place"] == 1, r.stderr
    final = json.loads(cli("show", "--json", addr=addr).stdout)["rules"][0]
    assert final["profile"] == "lan" and final["modified"] == [] and final["profile_id"] == moved["profile_id"]


def test_netem_options_apply_and_convert(bare_switch: SwitchProcess, tmp_path) -> None:
    """`apply --netem` puts the profile netem's options describe on the switch (read back by
    `show`); `profiles from-netem -o` writes the same profile as YAML; unsupported options
    are named and change nothing."""
    addr = bare_switch.grpc_addr
    options = "delay 100ms 10ms distribution normal loss gemodel 1% 20% 70% ecn rate 1mbit 24 limit 300"
    # The downlink counts ATM cells (48 + 5 bytes) for its link time.
    downlink = "delay 20ms rate 8mbit 0 48 5 slot 2ms 4ms packets 8"
    r = cli("apply", "--netem", options, "--netem-downlink", downlink,
            "--name", "from-tc", "--json", addr=addr)
    assert r.returncode == 0, r.stderr
    shown = json.loads(cli("show", "--json", addr=addr).stdout)["rules"]
    assert len(shown) == 1
    assert shown[0]["uplink"] == {"delay": "100ms", "jitter": "10ms", "jitter_distribution": "normal",
                                  "reorder": {"keep_order": False}, "rate": "1Mbit", "overhead": 24,
                                  "queue": {"packets": 300},
                                  "gilbert_elliott": {"p": "1%", "r": "20%", "loss_bad": "70%"}, "loss_ecn": True}
    assert shown[0]["downlink"] == {"delay": "20ms", "rate": "8Mbit", "cell_size": 48, "cell_overhead": 5,
                                    "queue": {"packets": 1000}, "slot": {"min": "2ms", "max": "4ms", "packets": 8}}

    out = tmp_path / "from-tc.yaml"
    r = cli("profiles", "from-netem", options, "--downlink", downlink,
            "--name", "from-tc", "-o", str(out))
    assert r.returncode == 0 and out.exists(), r.stderr
    named = json.loads(cli("show", "--json", "--profiles", str(out), addr=addr).stdout)["rules"][0]
    assert named["profile"] == "from-tc" and named["modified"] == []  # the file is what the switch holds
    printed = cli("profiles", "from-netem", options, "--downlink", downlink,
                  "--name", "from-tc")
    assert printed.returncode == 0 and printed.stdout == out.read_text()

    r = cli("apply", "--netem", "delay 1ms ecn slot 5ms 1ms", addr=addr)
    assert r.returncode == 1, r.stderr
    assert 'ecn: without a loss model: tc refuses it too ("ecn requested without loss model")' in r.stderr
    assert 'slot max_delay: "1ms" is below' in r.stderr
    r = cli("profiles", "from-netem", "delay 5ms frob")
    assert r.returncode == 1 and '"frob" is not a netem option p4netem knows' in r.stderr, r.stderr
    assert cli("apply", "lan", "--netem", "delay 1ms", addr=addr).returncode == 2
    assert json.loads(cli("show", "--json", addr=addr).stdout)["rules"] == shown  # nothing was written


def test_trace_check_and_run(bare_switch: SwitchProcess, tmp_path) -> None:
    """`trace check` summarises a Mahimahi trace; `trace run` plays its window rates on the
    switch (in place: one profile id) and leaves the last one on; a bad trace line is named."""
    addr = bare_switch.grpc_addr
    trace = Path(__file__).resolve().parents[2] / "examples" / "traces" / "steps-12-3mbit.trace"
    r = cli("trace", "check", "--downlink", str(trace))
    assert r.returncode == 0, r.stderr
    assert "2500 opportunities over 4000 ms (mean 7.57Mbit); 3 rate changes of 20ms windows over 4s, " \
           "rates 3.028Mbit..12.112Mbit" in r.stdout, r.stdout
    r = cli("trace", "run", "--downlink", str(trace), "--window", "100ms", "--duration", "1.2s",
            "--profile", "wan-90ms", "--json", addr=addr)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [e["at_ms"] for e in out["events"]] == [0, 100] and out["changes"] == 2
    assert out["events"][1]["action"] == "set downlink.rate=12.112Mbit"
    (rule,) = json.loads(cli("show", "--json", addr=addr).stdout)["rules"]
    assert rule["downlink"] == {"delay": "45ms", "rate": "12.112Mbit"} and rule["uplink"] == {"delay": "45ms"}
    assert rule["profile_id"] == 1  # every change in place: the rule never left its first id
    r = cli("trace", "run", "--downlink", str(trace), "--window", "100ms", "--duration", "1.2s", addr=addr)
    assert r.returncode == 0 and "2 changes; in force after their time: median " in r.stdout, r.stdout + r.stderr

    bad = tmp_path / "bad.trace"
    bad.write_text("1\n2\nthree\n")
    r = cli("trace", "run", "--downlink", str(bad), addr=addr)
    assert r.returncode == 1 and "line 3: 'three' is not a whole number of milliseconds" in r.stderr, r.stderr
    r = cli("trace", "check", "--downlink", str(trace), "--window", "0.1ms")
    assert r.returncode == 1 and "--window: 0.1ms out of range 1ms..10s" in r.stderr, r.stderr


def test_trace_load_plays_a_trace_in_the_data_plane(bare_switch: SwitchProcess, tmp_path) -> None:
    """`trace load` writes traces into free cells of the trace registers and applies the profile with
    each traced direction's `trace` (its rate left out, its queue kept); a second load finds the
    cells after the first, from what the switch's entries name."""
    addr = bare_switch.grpc_addr
    traces = Path(__file__).resolve().parents[2] / "examples" / "traces"
    base = tmp_path / "base.yaml"
    base.write_text("name: base\nboth: {delay: 5ms, rate: 2mbit, queue: 50}\n")
    r = cli("trace", "load", "--downlink", str(traces / "constant-6mbit.trace"), "--profile", str(base), "--json",
            addr=addr)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["downlink"] == {"source": str(traces / "constant-6mbit.trace"), "opportunities": 1000,
                                                "period": 2000, "cells": 0, "index_cells": 0}
    (rule,) = json.loads(cli("show", "--json", addr=addr).stdout)["rules"]
    assert rule["downlink"] == {"delay": "5ms", "queue": {"packets": 50},
                                "trace": {"opportunities": 1000, "period": 2000}}
    assert rule["uplink"] == {"delay": "5ms", "rate": "2Mbit", "queue": {"packets": 50}}
    r = cli("trace", "load", "--uplink", str(traces / "steps-12-3mbit.trace"), "--downlink",
            str(traces / "constant-6mbit.trace"), "--json", addr=addr)
    assert r.returncode == 0, r.stderr
    placed = json.loads(r.stdout)
    # The first load's cells are still named by the rule until the new profile replaces it.
    assert placed["uplink"]["cells"] == 1000 and placed["uplink"]["index_cells"] == 2001
    assert placed["downlink"]["cells"] == 3500 and placed["downlink"]["index_cells"] == 6002
    assert cli("trace", "load", addr=addr).returncode == 1


def _shared_objects(pid: int | str) -> set[str]:
    """The Python extension modules and libraries of Python's own directories mapped in a process."""
    return set(re.findall(r"/\S*python3[.\d]*/\S+\.so\b", Path(f"/proc/{pid}/maps").read_text()))


def test_the_command_starts_from_its_entry_module() -> None:
    """The installed script imports the entry of control-plane/pyproject.toml: a venv installed before
    the entry changed still imports the CLI itself (make reinstalls it: pyproject.toml is a
    prerequisite of its stamp)."""
    entry = re.search(r'^p4netem = "([\w.]+):main"', (Path(__file__).resolve().parents[2] / "control-plane" /
                                                   "pyproject.toml").read_text(), re.M).group(1)
    assert f"from {entry} import main" in P4NETEM.read_text(), f"{P4NETEM} is stale: run make (or pip install -e control-plane)"


# Runs `p4netem ARGS` as the installed script does, and lists the modules imported while Ctrl-C
# had Python's default handler (a KeyboardInterrupt raised at once, wherever it lands).
UNHELD_RUNNER = """
import json, signal, sys
from p4netem_entry import main
unheld = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name not in sys.modules and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            unheld.append(name)
        return None
sys.meta_path.insert(0, Watch())
sys.argv = ["p4netem", *sys.argv[2:]]
try:
    code = main()
except SystemExit as exc:
    code = exc.code
sys.meta_path.pop(0)
with open(REPORT, "w") as f:
    json.dump({"code": code, "unheld": unheld}, f)
"""


@pytest.mark.parametrize("args", [["--help"], [], ["show", "--help"], ["timeline", "run", "-h"], ["timeline"],
                                  ["lab", "--help"]], ids=lambda a: " ".join(a) or "no-args")
def test_a_help_imports_nothing_outside_the_hold_on_ctrl_c(tmp_path, args: list[str]) -> None:
    """typer and rich import some 120 modules only once they format a help (rich.markdown,
    markdown_it, pygments, ...; p4netem/cli/lazy_group.py HELP_MODULES), and typer converts the root
    options with pydantic, imported then: outside p4netem_entry's hold on Ctrl-C, a SIGINT landing
    in an import's module-lock callback was dropped by Python ("Exception ignored in: <function
    _get_module_lock.<locals>.cb>") and the help went on to exit 0. Deterministic: every module a
    help imports is imported while Ctrl-C is held (the test does not race a signal against them)."""
    report = tmp_path / "report.json"
    code = UNHELD_RUNNER.replace("REPORT", repr(str(report)))
    proc = subprocess.run([sys.executable, "-c", code, "-", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "100"})
    assert report.exists(), proc.stderr
    result = json.loads(report.read_text())
    assert result["code"] in (0, None, 2), (result, proc.stderr)  # 2: a group with no command, as click
    assert "Usage: p4netem" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert result["unheld"] == [], result["unheld"]


def test_ctrl_c_at_any_moment_of_the_help_exits_130_or_leaves_the_help_whole() -> None:
    """Ctrl-C in the second or so `p4netem` spends importing (P4Runtime, grpc, typer, the command
    group) printed a KeyboardInterrupt traceback. SIGINT at moments across `p4netem --help`: from
    the command's first own import on (an extension module the bare interpreter does not load),
    and from the first import of the help's formatting on (its _decimal: rich's tables), where
    typer and rich imported outside the hold on Ctrl-C. Each run exits 130 without
    a word, or ends with the whole help (exit 0, or killed by the signal once p4netem_entry gave
    it back its default action at exit); never Python's "Exception ignored" of a dropped
    KeyboardInterrupt, nor a traceback."""
    env = {**os.environ, "COLUMNS": "100"}
    whole = subprocess.run([str(P4NETEM), "--help"], capture_output=True, text=True, timeout=60, env=env)
    assert whole.returncode == 0 and whole.stdout.rstrip().endswith("╯"), whole
    probe = subprocess.Popen([sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        probe.stdout.readline()
        bare = _shared_objects(probe.pid)
    finally:
        probe.communicate("")

    def started(pid: int) -> bool:  # the command's own imports have begun
        return bool(_shared_objects(pid) - bare)

    def formatting(pid: int) -> bool:  # the help's own imports have begun
        return any("_decimal" in so for so in _shared_objects(pid))

    # From the first import on: the later delays are there for a loaded machine, whose imports take
    # longer (where the command is done in half a second they are not waited out: a signal after
    # the end finds nothing to interrupt).
    moments = ([(started, d) for d in (0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5, 2.0, 3.0)]
               + [(formatting, d) for d in (0, 0.005, 0.01, 0.02, 0.04, 0.08)])
    outcomes = []
    for reached, delay in moments:
        proc = subprocess.Popen(default_sigint([str(P4NETEM), "--help"]), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        try:
            while proc.poll() is None and not reached(proc.pid):
                time.sleep(0.0005)
        except OSError:
            pass  # ended already
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            pass
        proc.send_signal(signal.SIGINT)  # (nothing is sent once the command has ended)
        out, err = proc.communicate(timeout=60)
        what = (reached.__name__, delay, proc.returncode, err[-2000:])
        assert "Exception ignored" not in err and "Traceback" not in err, what
        if proc.returncode == 130:
            assert err == "", what
        else:
            assert proc.returncode in (0, -signal.SIGINT) and out == whole.stdout and err == "", what
        outcomes.append(proc.returncode)
    assert 130 in outcomes, outcomes
