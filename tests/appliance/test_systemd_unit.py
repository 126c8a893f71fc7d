"""The shipped unit (packaging/systemd/p4netem-switch.service) run by a real systemd: Debian's
systemd 252 booted as PID 1 in namespaces of its own, on this machine's root (tests/systemd_boot.py),
the unit and /etc/default/p4netem installed as docs/cli.md says, its ports two veths of the host's
network namespace. Started with `systemctl start`, it is active (running) with the start profile in
force (a unit ordered After= it finds the profile on the switch), under its hardening (seen in
force on the processes) without a warning from the switch (raw sockets, XDP, AF_XDP, SCHED_FIFO,
PM QoS all work); `systemctl stop` is a clean stop; a stalled data-plane thread is seen by the
watchdog, systemd kills the service and Restart= brings it back with its start profile.
tests/control/test_switch_service.py checks the same command with systemd's side emulated, message
by message; here nothing is emulated. The unit ships WatchdogSec=30 (checked as systemd loads it);
the stall is seen with a test-only drop-in of WatchdogSec=6 and RestartSec=1, the rest of the unit
as shipped: `p4netem switch` pings every quarter of what systemd asks (WATCHDOG_USEC), checked on
systemd's side, so the shipped 30 s would only make the wait five times longer, and the shipped
RestartSec=5 only the pause before the restart (the restart itself, its start profile and its new
process are what is checked). About 20 s, most of it the watchdog's 6 s and two starts (systemd
itself boots in about 0.3 s)."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from p4netem.lab import TwoHostLab, free_tcp_port
from systemd_boot import BootedSystemd, cannot_boot, missing
from thread_stop import stopped_thread, thread_ids

ROOT = Path(__file__).resolve().parents[2]
UNIT = "p4netem-switch.service"
WHY_NOT = None if missing() else cannot_boot()  # (not root, or no systemd: the fixture fails)
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"systemd cannot boot as PID 1 here: {WHY_NOT}")

# A unit ordered after the switch's, as a service that needs a shaping link would be: systemd starts
# it once p4netem-switch.service counts as started (READY=1), and it records what the switch has then.
PROBE = """[Unit]
Description=needs p4netem-switch shaping
After=p4netem-switch.service
Requires=p4netem-switch.service

[Service]
Type=oneshot
ExecStart=/opt/p4netem/.venv/bin/p4netem show --json --switch {addr}
StandardOutput=file:/run/p4netem-probe.json
"""


def rtt_ms(lab: TwoHostLab, count: int = 3) -> float:
    out = lab.h1.ns.run(["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "5", lab.h2.ip]).stdout
    m = re.search(r"= [\d.]+/([\d.]+)/", out)
    assert m, out
    return float(m.group(1))


def listening(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def wait_for(what: str, check, timeout: float, period: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(period)


@pytest.fixture(scope="module")
def lab() -> Iterator[TwoHostLab]:
    """The switch's two ports: veths in the host's network namespace, their hosts in namespaces."""
    hosts = TwoHostLab()
    try:
        hosts._build_hosts()  # namespaces and veths only: the unit starts the switch
        yield hosts
    finally:
        hosts.close()


@pytest.fixture(scope="module")
def systemd(tmp_path_factory, switch_bin: str) -> Iterator[BootedSystemd]:
    if missing():
        pytest.fail(missing(), pytrace=False)
    read_only = [ROOT] + ([] if Path(switch_bin).resolve().is_relative_to(ROOT) else [Path(switch_bin)])
    booted = BootedSystemd(tmp_path_factory.mktemp("systemd"), read_only).start()
    try:
        print(f"systemd booted as PID 1 (to running) in {booted.boot_s:.2f} s")
        # Installed as docs/cli.md says, in the booted system's root (an overlay: gone afterwards).
        booted.run("sh", "-c", f"""set -e
            test "$(findmnt -n -o FSTYPE /)" = overlay  # its own root, not the host's
            cd {ROOT}
            if [ -e /opt/p4netem ]; then rm -r /opt/p4netem; fi
            ln -s "$PWD" /opt/p4netem
            cp packaging/systemd/p4netem-switch.service /etc/systemd/system/
            cp packaging/systemd/p4netem.default /etc/default/p4netem
            systemctl daemon-reload && systemctl enable p4netem-switch  # enable --now: started by the tests""")
        yield booted
    finally:
        booted.close()


def configure(systemd: BootedSystemd, lab: TwoHostLab, addr: str, switch_bin: str, opts: str = "") -> None:
    """/etc/default/p4netem edited as its comments say: the lab's ports, netem's options quoted
    (systemd splits them), the switch's address and binary (the tree under test's)."""
    systemd.path("/etc/default/p4netem").write_text(
        f'P4NETEM_PORTS="-i 1@{lab.h1.switch_iface} -i 2@{lab.h2.switch_iface}"\n'
        f'P4NETEM_APPLY="--netem \'delay 40ms rate 100mbit\' --rule client={lab.h1.ip}"\n'
        f'P4NETEM_OPTS="--fix-offloads --switch {addr} --binary {switch_bin} {opts}"\n')
    systemd.path("/etc/systemd/system/p4netem-probe.service").write_text(PROBE.format(addr=addr))
    systemd.run("systemctl", "daemon-reload")


def assert_start_profile(rules: dict, lab: TwoHostLab) -> None:
    (rule,) = rules["rules"]
    assert rule["profile"] is None and rule["modified"] == [], rule  # netem's options, as applied
    assert rule["rule"]["client"] == lab.h1.ip, rule
    assert rule["uplink"]["delay"] == rule["downlink"]["delay"] == "40ms", rule


def show_rules(systemd: BootedSystemd, addr: str) -> dict:
    return json.loads(systemd.run("/opt/p4netem/.venv/bin/p4netem", "show", "--json", "--switch", addr).stdout)


def service_processes(systemd: BootedSystemd) -> list[int]:
    """The unit's processes as this process sees them (pids of its cgroup)."""
    assert systemd.cgroup is not None
    procs = systemd.cgroup / "system.slice" / UNIT / "cgroup.procs"
    return [int(p) for p in procs.read_text().split()] if procs.exists() else []


def switch_pid(systemd: BootedSystemd) -> int:
    (pid,) = [p for p in service_processes(systemd) if Path(f"/proc/{p}/comm").read_text().strip() == "p4netem-switch"]
    return pid


def assert_running_with_start_profile(systemd: BootedSystemd, lab: TwoHostLab, addr: str, restarts: int) -> None:
    state = systemd.show(UNIT, "ActiveState", "SubState", "StatusText", "NRestarts")
    assert state == {"ActiveState": "active", "SubState": "running", "NRestarts": str(restarts),
                     "StatusText": f"running: 1@{lab.h1.switch_iface} 2@{lab.h2.switch_iface}; P4Runtime {addr}; "
                                   "port map 1->2, 2->1; profile netem"}, state
    assert_start_profile(show_rules(systemd, addr), lab)
    assert rtt_ms(lab) >= 80  # 40 ms each way: the profile, not a bare wire


def switch_log(systemd: BootedSystemd, since: str) -> list[str]:
    """The unit's journal lines from the last line containing `since` on."""
    lines = systemd.journal(UNIT).splitlines()
    starts = [i for i, line in enumerate(lines) if since in line]
    assert starts, systemd.journal(UNIT)
    return lines[starts[-1]:]


def assert_hardened_and_unharmed(systemd: BootedSystemd, log: list[str], io: str) -> None:
    """The unit's hardening is in force on the switch, and the switch got all it needs anyway."""
    pid = switch_pid(systemd)
    assert "NoNewPrivs:\t1" in Path(f"/proc/{pid}/status").read_text()
    mounts = {line.split()[4]: line.split()[5] for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()}
    for path in ("/usr", "/etc", "/proc/sys", "/sys/fs/cgroup"):  # ProtectSystem=full, ProtectKernelTunables, ...
        assert mounts.get(path, "").startswith("ro"), (path, mounts.get(path))
    (dp,) = thread_ids(pid, "p4netem-dp")
    assert os.sched_getscheduler(dp) == os.SCHED_FIFO  # not refused by the hardening
    text = "\n".join(log)
    for needed in (f"port up: {io}", "holding CPU wake-up latency (PM QoS)", "data-plane thread runs SCHED_FIFO",
                   "P4Runtime server listening"):
        assert needed in text, (needed, text)
    if io == "af_packet":
        assert "fast path: on (XDP flow cache" in text, text
    warnings = [line for line in log if re.search(r"\b(WARN|ERROR)\b|warning:|[Pp]ermission denied|EPERM|EACCES", line)]
    assert not warnings, "\n".join(warnings)


def test_started_stopped_and_hardened_under_systemd(systemd: BootedSystemd, lab: TwoHostLab, switch_bin: str) -> None:
    """`systemctl start`: active (running) with the start profile on the switch, already when a unit
    ordered after it starts; no warning under the hardening, with AF_PACKET and its XDP fast path,
    then with AF_XDP; `systemctl stop`: a clean stop (exit 0, result success, the switch gone)."""
    addr = f"127.0.0.1:{free_tcp_port()}"
    configure(systemd, lab, addr, switch_bin)
    started = time.monotonic()
    systemd.run("systemctl", "start", UNIT, "p4netem-probe.service")
    print(f"systemctl start: {time.monotonic() - started:.2f} s")
    # What the unit ordered after it found: the start profile already in force.
    assert_start_profile(json.loads(systemd.path("/run/p4netem-probe.json").read_text()), lab)
    assert_running_with_start_profile(systemd, lab, addr, restarts=0)
    assert_hardened_and_unharmed(systemd, switch_log(systemd, "Starting p4netem-switch.service"), "af_packet")
    # The shipped watchdog, in force for this run, and as systemd told `p4netem switch` (WATCHDOG_USEC,
    # the cadence of its pings: test_the_watchdog_restarts_... checks them with a shorter one).
    assert systemd.show(UNIT, "WatchdogUSec") == {"WatchdogUSec": "30s"}
    main = systemd.show(UNIT, "MainPID")["MainPID"]  # in systemd's PID namespace, whose /proc this is:
    assert b"WATCHDOG_USEC=30000000" in systemd.path(f"/proc/{main}/environ").read_bytes().split(b"\0")

    # Restarted with AF_XDP ports (their own XDP programs, bpf(2), AF_XDP sockets).
    configure(systemd, lab, addr, switch_bin, "--io af_xdp")
    systemd.run("systemctl", "restart", UNIT)
    assert_running_with_start_profile(systemd, lab, addr, restarts=0)
    assert_hardened_and_unharmed(systemd, switch_log(systemd, "Starting p4netem-switch.service"), "af_xdp")

    systemd.run("systemctl", "stop", UNIT)
    assert systemd.show(UNIT, "ActiveState", "SubState") == {"ActiveState": "inactive", "SubState": "dead"}
    assert service_processes(systemd) == [] and not listening(addr)
    # (An inactive unit nothing refers to is unloaded, its Result= and ExecMain*= reset: the journal
    # keeps what its stop was.) `p4netem switch` stopped the switch and exited 0, nothing killed:
    log = "\n".join(switch_log(systemd, "Stopping p4netem-switch.service"))
    assert "p4netem-switch stopped" in log and "p4netem-switch.service: Deactivated successfully." in log, log
    for failure in ("Failed with result", "Main process exited", "Killing process", "SIGKILL"):
        assert failure not in log, log


# A test-only drop-in (removed after the test): the stall test waits out 6 s, not the shipped 30 s,
# and 1 s before the restart, not the shipped 5 s (the pause only: the restart happens, with its
# start profile, either way; until 2026-12-01 the shipped 5 s, waited out in every make test).
# `p4netem switch` probes every quarter of what systemd asks (WATCHDOG_USEC; 1.5 s here, 7.5 s as
# shipped), so the ratio of probes to the timeout is the shipped one: four chances each time. Not
# shorter: the switch's health turns NOT_SERVING after its 3-s --heartbeat-timeout-ms, and each probe
# may take up to a quarter to answer on a loaded machine.
TEST_WATCHDOG_S = 6
TEST_RESTART_S = 1
WATCHDOG_DROP_IN = "/etc/systemd/system/p4netem-switch.service.d/p4netem-test-watchdog.conf"


def keep_alives(systemd: BootedSystemd, seconds: float, until: int) -> list[int]:
    """The distinct values (monotonic, us) of the unit's WatchdogTimestampMonotonic within `seconds`,
    polled every 0.2 s, up to the `until`th: systemd sets it when the unit is ready (READY=1) and
    again at each WATCHDOG=1 it receives."""
    seen: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(seen) < until:
        stamp = int(systemd.show(UNIT, "WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"])
        if stamp and (not seen or stamp != seen[-1]):
            seen.append(stamp)
        time.sleep(0.2)
    return seen


def test_the_watchdog_restarts_a_switch_whose_data_plane_stalls(systemd: BootedSystemd, lab: TwoHostLab,
                                                                   switch_bin: str) -> None:
    """The data-plane thread stopped (ptrace; the rest of the switch, its gRPC server too, runs on):
    the health check says NOT_SERVING, `p4netem switch` stops vouching for it, and WatchdogSec (6 s
    here by a drop-in; 30 s as shipped, asserted in test_started_stopped_and_hardened_under_systemd)
    later systemd kills the unit (result watchdog) and starts it again, start profile applied. Until
    then `p4netem switch` keeps the watchdog at the cadence systemd asks (WATCHDOG_USEC)."""
    addr = f"127.0.0.1:{free_tcp_port()}"
    configure(systemd, lab, addr, switch_bin)
    drop_in = systemd.path(WATCHDOG_DROP_IN)
    drop_in.parent.mkdir(parents=True, exist_ok=True)
    drop_in.write_text(f"[Service]\nWatchdogSec={TEST_WATCHDOG_S}\nRestartSec={TEST_RESTART_S}\n")
    try:
        systemd.run("systemctl", "daemon-reload")
        _watchdog_restarts_a_stalled_switch(systemd, lab, addr)
    finally:
        drop_in.unlink(missing_ok=True)  # the shipped unit again for the other tests
        systemd.run("systemctl", "daemon-reload")


def _watchdog_restarts_a_stalled_switch(systemd: BootedSystemd, lab: TwoHostLab, addr: str) -> None:
    systemd.run("systemctl", "start", UNIT)
    # (WatchdogUSec is the value in force for the unit's current or last run.)
    assert systemd.show(UNIT, "WatchdogUSec", "RestartUSec") == {"WatchdogUSec": f"{TEST_WATCHDOG_S}s",
                                                                 "RestartUSec": f"{TEST_RESTART_S}s"}
    main = systemd.show(UNIT, "MainPID")["MainPID"]
    # What systemd asks of `p4netem switch` (sd_watchdog_enabled(3)), as its process was started:
    env = systemd.path(f"/proc/{main}/environ").read_bytes().split(b"\0")  # (MainPID: in systemd's PID namespace)
    assert f"WATCHDOG_USEC={TEST_WATCHDOG_S * 1_000_000}".encode() in env, env
    # ... and what it does: WATCHDOG=1 every quarter (1.5 s; 2 s at its 1-s ticks) as long as the
    # switch is healthy. Three readings (ready, then two pings at least) within 8 s, each less than
    # WatchdogSec after the one before; at the cadence of the shipped 30 s (every 7.5 s) systemd
    # kills the unit before its second ping (tried: this fails). (Watched while the start profile
    # is checked.)
    with ThreadPoolExecutor(1) as watcher:
        watched = watcher.submit(keep_alives, systemd, 8, until=3)
        assert_running_with_start_profile(systemd, lab, addr, restarts=0)
        pings = watched.result()
    assert len(pings) == 3, pings
    assert all(b - a < TEST_WATCHDOG_S * 1_000_000 for a, b in zip(pings, pings[1:])), pings
    pid = switch_pid(systemd)
    (dp,) = thread_ids(pid, "p4netem-dp")
    # Well over WatchdogSec (+ the 3-s health timeout and a probe period) before the kill; the unit
    # then waits RestartSec (the drop-in's 1 s).
    with stopped_thread(pid, dp):  # until the kill (the switch killed with it: its thread is not let run)
        wait_for("the watchdog's kill", lambda: systemd.show(UNIT, "Result", "NRestarts")
                 in ({"Result": "watchdog", "NRestarts": "0"}, {"Result": "success", "NRestarts": "1"}), 90)
    wait_for("the killed switch gone", lambda: not Path(f"/proc/{pid}").exists(), 60)
    wait_for("the restart", lambda: systemd.show(UNIT, "NRestarts", "ActiveState", "SubState")
             == {"NRestarts": "1", "ActiveState": "active", "SubState": "running"}, 90)
    assert systemd.show(UNIT, "MainPID")["MainPID"] != main
    assert_running_with_start_profile(systemd, lab, addr, restarts=1)
    log = systemd.journal(UNIT)
    assert f"Watchdog timeout (limit {TEST_WATCHDOG_S}s)!" in log and "with signal SIGABRT" in log, log
    assert "data-plane loop has not run" in log, log  # what the switch's health check saw
    systemd.run("systemctl", "stop", UNIT)
    assert systemd.show(UNIT, "Result")["Result"] == "success"


def test_a_typo_in_the_environment_file_fails_the_unit_without_retries(systemd: BootedSystemd, lab: TwoHostLab,
                                                                       switch_bin: str) -> None:
    """An option p4netem-switch does not know in P4NETEM_OPTS (passed on to it): `p4netem switch`
    exits 2 (usage) before anything starts, and RestartPreventExitStatus=2 makes the unit fail at
    once, named in the journal, rather than retry what cannot work. (The switch's own exit 2 made
    `p4netem switch` exit 1, and systemd retried it 5 times before giving up.)"""
    addr = f"127.0.0.1:{free_tcp_port()}"
    configure(systemd, lab, addr, switch_bin, "--rt-prio 0")
    assert systemd.run("systemctl", "start", UNIT, check=False).returncode != 0
    state = systemd.show(UNIT, "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts")
    assert state == {"ActiveState": "failed", "SubState": "failed", "Result": "exit-code", "ExecMainStatus": "2",
                     "NRestarts": "0"}, state  # not activating (auto-restart)
    log = systemd.journal(UNIT)
    assert "p4netem-switch refuses the options passed on to it: unexpected argument '--rt-prio' found" in log, log
    assert not listening(addr)
    systemd.run("systemctl", "reset-failed", UNIT)
