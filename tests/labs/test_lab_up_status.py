"""`p4netem lab up --cmd`: every line runs, and the exit status says whether each did what it was
asked, as a shell script's would: a host command's non-zero exit and a lab command's refusal are an
`error:` line each and exit 1 (Mininet's CLI prints a command's output and drops its status)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

P4NETEM = str(Path(sys.executable).parent / "p4netem")


def lab_up(*cmds: str) -> subprocess.CompletedProcess:
    args = [P4NETEM, "lab", "up", "inline"]
    for c in cmds:
        args += ["--cmd", c]
    return subprocess.run(args, capture_output=True, text=True, timeout=180)


def test_a_failing_command_makes_lab_up_exit_1_and_is_named(switch_bin):
    res = lab_up("client true", "client sh -c 'exit 3'", "profile no-such-profile",
                 "client ping -c 1 -W 5 server", "client echo still-running")
    assert res.returncode == 1, (res.stdout, res.stderr)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors[0] == "error: --cmd \"client sh -c 'exit 3'\" exited with status 3", res.stderr
    assert errors[1].startswith("error: --cmd 'profile no-such-profile': profile: "), res.stderr
    assert len(errors) == 2, res.stderr  # true, the ping through the switch and echo succeeded
    assert "still-running" in res.stdout + res.stderr  # the lines after a failure ran (Mininet prints a
    # host command's output through its log, on stderr)


def test_commands_that_succeed_exit_0(switch_bin):
    res = lab_up("client ping -c 1 -W 5 server", "profile lan", "time server true")
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert "error:" not in res.stderr
