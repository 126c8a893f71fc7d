"""p4netem as a service: `p4netem switch --apply PROFILE` (checked before the switch starts, applied
before it reports running, the switch stopped when the switch refuses it) and the shipped systemd
unit (packaging/systemd/p4netem-switch.service): systemd-analyze verifies it, and its ExecStart,
expanded from an environment file as systemd would, shapes from its first "running" line, stops
with exit 0 on the SIGTERM systemd sends, and shapes again when started again (after a clean stop
and after a crash). systemd is not PID 1 here, so the unit is never started by systemd itself."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from p4netem.lab import TwoHostLab, free_tcp_port
from test_cli import P4NETEM, _port_open, cli, rtt_ms

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "packaging" / "systemd" / "p4netem-switch.service"
DEFAULTS = ROOT / "packaging" / "systemd" / "p4netem.default"
INSTALLED = "/opt/p4netem"  # where the unit expects the repository (docs/cli.md)


def unit_settings(path: Path) -> dict[str, list[str]]:
    """Key -> values (in order) of a unit file, sections merged: enough for this unit's keys."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def environment_file(path: Path) -> dict[str, str]:
    """VAR=value lines as systemd's EnvironmentFile= reads them (comments, shell-style quotes)."""
    env = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            (word,) = shlex.split(line)
            key, _, value = word.partition("=")
            env[key] = value
    return env


def expand(command: str, env: dict[str, str]) -> list[str]:
    """An ExecStart= line as systemd expands it: a word that is `$VAR` becomes the variable's value
    split at whitespace (no word when empty), `${VAR}` its value as one word."""
    argv: list[str] = []
    for word in shlex.split(command):
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv += env.get(whole.group(1), "").split()
        else:
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word))
    return argv


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian: systemd)")
def test_the_shipped_unit_verifies_and_its_variables_are_the_example_files(tmp_path) -> None:
    # verify checks that ExecStart's program exists: the unit as installed with the repository at
    # /opt/p4netem, here at this checkout.
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(INSTALLED, str(ROOT)))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    # A misspelt setting is only a warning (exit 0, "Failed to parse ..., ignoring"): none allowed.
    assert r.returncode == 0 and r.stderr == "", r.stderr

    settings = unit_settings(UNIT)
    assert settings["Restart"] == ["on-failure"] and settings["KillMode"] == ["mixed"]
    assert "network-online.target" in settings["After"][0] and settings["EnvironmentFile"] == ["/etc/default/p4netem"]
    (command,) = settings["ExecStart"]
    used = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", command))
    example = environment_file(DEFAULTS)
    assert used == set(example), "the example /etc/default/p4netem sets what ExecStart uses"
    argv = expand(command, example)
    assert argv[:2] == [f"{INSTALLED}/.venv/bin/p4netem", "switch"] and "--apply" in argv, argv
    shown = dict(re.findall(r'^    (P4NETEM_\w+)="([^"]*)"', (ROOT / "docs" / "cli.md").read_text(), re.M))
    assert shown == example, "docs/cli.md shows the example file as it is"


def test_switch_apply_refuses_bad_input_before_starting(switch_bin: str, tmp_path) -> None:
    """A bad --apply profile or rule: exit 1 with `apply`'s own message, and no switch started
    (with a port that does not exist, a started switch would fail with "exited with code")."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nuplink: {loss: 150%, delay: 50}\n")
    cases = [["no-such-profile"], [str(bad)], ["lan", "--rule", "client=10.0.0.1,dscp=99"]]
    for args in cases:
        addr = f"127.0.0.1:{free_tcp_port()}"
        expected = cli("apply", *args, addr=addr)
        r = cli("switch", "-i", "1@no-such-iface0", "--switch", addr, "--binary", switch_bin,
                "--apply", *args)
        assert expected.returncode == 1 and expected.stderr.startswith("error: "), expected.stderr
        assert (r.returncode, r.stderr) == (1, expected.stderr), args
        assert "running" not in r.stdout and not _port_open(addr)
    r = cli("switch", "--binary", switch_bin, "--rule", "client=10.0.0.1")
    assert r.returncode == 2 and "give --apply PROFILE too" in r.stderr, r.stderr


def test_switch_apply_the_switch_refuses_stops_the_switch(switch_bin: str) -> None:
    """A profile the running switch refuses (rules beyond its --ue-ids: known only once it runs)
    stops it: a service must not come up without its start profile."""
    if os.geteuid() != 0:
        pytest.fail("needs root", pytrace=False)
    addr = f"127.0.0.1:{free_tcp_port()}"
    r = cli("switch", "--switch", addr, "--binary", switch_bin, "--rt-priority", "0", "--ue-ids", "1024",
            "--apply", "lan", "--rule", "client=10.1.0.0/16,ue=by-address")
    assert r.returncode == 1, r.stderr
    assert "p4netem-switch running" not in r.stdout
    assert "p4netem-switch stopped: --apply lan failed" in r.stdout, r.stdout
    assert "error: rules[0].ue_base: client.ip 10.1.0.0/16 has 65536 addresses, more than the switch's 1024 UE ids" in r.stderr
    assert "SIGTERM: shutting down" in r.stderr  # the switch's own clean stop
    assert not _port_open(addr)


def test_the_units_command_shapes_from_start_and_again_after_a_restart_or_crash(switch_bin: str, tmp_path) -> None:
    if os.geteuid() != 0:
        pytest.fail("needs root", pytrace=False)
    hosts = TwoHostLab()
    started: list[subprocess.Popen] = []
    try:
        hosts._build_hosts()  # namespaces and veths only; the unit's command starts the switch
        profile = tmp_path / "p4n59-service.yaml"
        profile.write_text("name: p4n59-service\nuplink: {delay: 40ms}\ndownlink: {delay: 40ms}\n")
        addr = f"127.0.0.1:{free_tcp_port()}"
        env_file = tmp_path / "p4netem"
        env_file.write_text(
            f'P4NETEM_PORTS="-i 1@{hosts.h1.switch_iface} -i 2@{hosts.h2.switch_iface}"\n'
            f'P4NETEM_APPLY="--apply {profile} --rule client={hosts.h1.ip}"\n'
            f'P4NETEM_OPTS="--fix-offloads --switch {addr} --binary {switch_bin} --rt-priority 0"\n')
        settings = unit_settings(UNIT)
        (command,) = settings["ExecStart"]
        argv = expand(command, environment_file(env_file))
        assert argv[0] == f"{INSTALLED}/.venv/bin/p4netem"
        argv[0] = str(P4NETEM)  # the unit's program, as installed
        env = {**os.environ, "COLUMNS": "160",
               **dict(e.split("=", 1) for v in settings.get("Environment", []) for e in shlex.split(v))}

        def start() -> tuple[subprocess.Popen, int]:
            """The unit's command started; returns it and the switch's pid once it says running,
            after checking that the start profile is on the switch and shapes a ping."""
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            started.append(proc)
            assert proc.stdout is not None
            before = []
            for line in proc.stdout:
                if line.startswith("p4netem-switch running"):
                    break
                before.append(line)
            else:
                pytest.fail(f"no running line; exit {proc.wait()}:\n{''.join(before)}{proc.stderr.read()}")
            # Applied before it says running: anything that waits for the line finds the profile.
            assert before and before[0].startswith("applied p4n59-service to 1 rule(s)"), before
            assert "port map 1->2, 2->1; profile p4n59-service." in line
            # (show names a profile from a file when given that file, as apply was)
            (rule,) = json.loads(cli("show", "--json", "--profiles", str(profile), addr=addr).stdout)["rules"]
            assert rule["profile"] == "p4n59-service" and rule["modified"] == [], rule
            assert rule["rule"]["client"] == hosts.h1.ip and rule["downlink"]["delay"] == "40ms", rule
            assert rtt_ms(hosts, 3) >= 80  # 40 ms each way: the profile, not a bare wire
            return proc, int(re.search(r"\(pid (\d+)\)", line).group(1))

        def wait(proc: subprocess.Popen) -> tuple[int, str, str]:
            out, err = proc.communicate(timeout=30)
            return proc.returncode, out, err

        # First start, stopped as systemd stops it (KillMode=mixed: SIGTERM to the main process).
        proc, _ = start()
        proc.send_signal(signal.SIGTERM)
        rc, out, err = wait(proc)
        assert rc == 0 and "p4netem-switch stopped" in out, err
        assert "SIGTERM: shutting down" in err and not _port_open(addr)

        # Started again (a reboot, a restart): the profile is back. Then the switch crashes.
        proc, switch_pid = start()
        os.kill(switch_pid, signal.SIGKILL)
        rc, out, err = wait(proc)
        assert rc == 1 and "p4netem-switch exited with code -9" in err, err  # on-failure restarts it

        # Restarted after the crash (whatever the killed switch left on its ports): shaping again.
        proc, _ = start()
        proc.send_signal(signal.SIGTERM)
        rc, out, err = wait(proc)
        assert rc == 0, err
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        hosts.close()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_stop_during_start_up_is_a_clean_stop(switch_bin: str) -> None:
    """systemd may stop the unit while it starts (a stop or restart right after boot): SIGTERM to
    `p4netem switch` while the switch comes up or --apply writes ended it with exit 1 or 3 (a failed
    stop in systemd's eyes). Sent the moment the switch process exists, so before it listens."""
    if os.geteuid() != 0:
        pytest.fail("needs root", pytrace=False)
    addr = f"127.0.0.1:{free_tcp_port()}"
    proc = subprocess.Popen([str(P4NETEM), "switch", "--switch", addr, "--binary", switch_bin, "--rt-priority", "0",
                             "--apply", "lte"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _children(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert _children(proc.pid), proc.communicate(timeout=30)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (out, err)
    assert "p4netem-switch stopped" in out and "running" not in out, out
    assert not _port_open(addr)
