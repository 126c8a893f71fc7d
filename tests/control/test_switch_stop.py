"""Stopping the switch while a controller is connected: a controller holds its StreamChannel open
for as long as it runs (mastership lives on it), so a graceful shutdown that waited for every
stream to end never ended. SIGTERM now exits in about a second, the controller sees its stream
end, and the switch's log says it closed the open streams."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from p4netem.p4rt import P4RuntimeClient


def test_sigterm_stops_the_switch_with_a_controller_still_connected(bare_switch) -> None:
    client = P4RuntimeClient(bare_switch.grpc_addr, election_id=1).connect()
    try:
        assert client.is_primary
        proc = bare_switch.proc
        assert proc is not None
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        # Generous for a loaded machine; before the fix it waited for the client forever.
        code = proc.wait(timeout=20)
        took = time.monotonic() - t0
        assert code == 0, bare_switch.log_tail()
        assert "closing them" in bare_switch.log_tail(), bare_switch.log_tail()
        print(f"switch exited {took:.2f} s after SIGTERM with a controller connected")
    finally:
        client.close()


CTRL_C_AT_A_PROMPT = """
import os, signal, sys, time
from p4netem.lab import SwitchProcess
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a lab's prompt handles Ctrl-C itself
switch = SwitchProcess({}, binary=sys.argv[1], log_path=sys.argv[2], extra_args=["--rt-priority", "0"]).start()
os.killpg(0, signal.SIGINT)  # what a terminal does on Ctrl-C: SIGINT to the foreground process group
time.sleep(1.0)
print("running" if switch.running() else f"stopped {switch.proc.returncode}")
switch.stop()
"""


def test_ctrl_c_at_a_lab_prompt_does_not_stop_the_switch(switch_bin: str, tmp_path) -> None:
    # Before: the switch shared the owner's process group, so Ctrl-C at `lab up`'s prompt stopped
    # the data plane while the lab (whose hosts Mininet starts in their own sessions) ran on.
    r = subprocess.run([sys.executable, "-c", CTRL_C_AT_A_PROMPT, switch_bin, str(tmp_path / "switch.log")],
                       capture_output=True, text=True, timeout=120, start_new_session=True)
    assert r.returncode == 0 and r.stdout.strip() == "running", r.stdout + r.stderr
