"""A local lab process of `experiment run --parallel` (runs/local.py) and its stop, without a lab."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# The lab process's own main (_lab_main) with a worker whose start forks, as a Mininet lab's does
# hundreds of times, and SIGTERM (the driver's abort) arriving during that fork: Python runs the
# lab's handler in the at-fork callback (logging registers one; this script registers its own,
# which raises the signal there), prints its SystemExit as "Exception ignored" and drops it. The
# lab then went on waiting for the driver's next message, and the driver waited for it to close.
_STOP_DURING_A_FORK = """
import os, signal, subprocess, sys
from multiprocessing import Pipe
from p4netem_studies.runs import local

class ForkingWorker:
    def __init__(self, *args, **kwargs):
        pass

    def start(self):
        fired = []
        def during_the_fork():
            if not fired:
                fired.append(True)
                signal.raise_signal(signal.SIGTERM)   # its handler runs here, at once
        os.register_at_fork(after_in_parent=during_the_fork)
        subprocess.Popen(["true"], preexec_fn=lambda: None).wait()   # preexec_fn: a fork, callbacks run
        print("the start went on", flush=True)
        return {}

    def close(self):
        print("lab closed", flush=True)
        return {}

local.LabWorker = ForkingWorker
driver, lab = Pipe()
local._lab_main(lab, {}, "lab0", 0, False, sys.argv[1])   # the driver sends nothing: only the stop ends it
"""


def test_a_stop_python_dropped_during_a_fork_still_ends_the_lab_process(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        r = subprocess.run([sys.executable, "-c", _STOP_DURING_A_FORK, str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        r = None
    log = (tmp_path / "logs" / "lab0" / "lab.log").read_text()
    assert "Exception ignored" in log and "SystemExit: 143" in log, log   # Python did drop it
    if r is None:
        pytest.fail(f"the lab process went on waiting for its driver after SIGTERM:\n{log}")
    assert r.returncode == 143, (r, log)
    assert log.index("the start went on") < log.index("lab closed"), log
