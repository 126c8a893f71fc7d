"""What the user's programs in a lab see of the `p4netem` command's own environment. The command
line sets GRPC_VERBOSITY=NONE for itself (p4netem_entry.quiet_grpc_logs: gRPC core's TLS log lines
off its stderr); `p4netem lab up` runs the user's commands (--cmd, the interactive CLI, `sh`) in
shells that inherit its environment, so a gRPC program of theirs run there logged nothing, not
even its errors. The lab takes the value it set back out (p4netem_entry.restore_grpc_logs); a
GRPC_VERBOSITY the user set is passed on as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

P4NETEM = str(Path(sys.executable).parent / "p4netem")
# Printed by a lab host's shell and by the lab's `sh` (a shell of the command's own process).
SHOWN = ("client echo host-verbosity=${GRPC_VERBOSITY-unset}", "sh echo sh-verbosity=${GRPC_VERBOSITY-unset}")


def _lab_up(**given: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GRPC_VERBOSITY", "GRPC_TRACE")}
    args = [P4NETEM, "lab", "up", "inline"]
    for line in SHOWN:
        args += ["--cmd", line]
    res = subprocess.run(args, capture_output=True, text=True, timeout=180, env={**env, **given})
    assert res.returncode == 0, (res.stdout, res.stderr)
    return res.stdout + res.stderr  # (Mininet prints a host command's output on stderr)


def test_lab_commands_do_not_inherit_the_cli_s_own_grpc_verbosity(switch_bin):
    out = _lab_up()
    assert "host-verbosity=unset" in out and "sh-verbosity=unset" in out, out


def test_lab_commands_get_the_user_s_grpc_verbosity(switch_bin):
    out = _lab_up(GRPC_VERBOSITY="info")
    assert "host-verbosity=info" in out and "sh-verbosity=info" in out, out


def test_the_command_keeps_the_level_it_set_for_itself() -> None:
    """restore_grpc_logs imports grpc before it takes the value out: gRPC reads it then, so the
    command's own gRPC keeps it. Shown with a level gRPC announces (DEBUG: a warning that it is not
    for production, logged as gRPC starts: at a channel), set as main sets NONE."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRPC_VERBOSITY", "GRPC_TRACE")}
    script = ("import os, p4netem_entry as e\n"
              "os.environ['GRPC_VERBOSITY'] = 'debug'\n"
              "e._injected['GRPC_VERBOSITY'] = 'debug'\n"
              "e.restore_grpc_logs()\n"
              "print(os.environ.get('GRPC_VERBOSITY'))\n"
              "import grpc\n"
              "grpc.insecure_channel('127.0.0.1:1').close()\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "None", r.stdout + r.stderr
    assert "Log level DEBUG is not suitable" in r.stderr, r.stderr
