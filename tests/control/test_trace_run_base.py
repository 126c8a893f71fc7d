"""`p4netem trace run --profile` takes the bases `trace load --profile` takes: a queue limit and an AQM
and no rate (mm-link's `--downlink-queue=codel --downlink-queue-args=packets=100`), in its own file
or as a profile of a `--profiles` library, is a whole link once the trace's rates are in. `run`
read --profile as a whole profile alone and refused it ("a queue limit needs a rate"), while `load`
took it; the rate it replaces is checked the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from child_signals import default_sigint
from p4netem.lab import SwitchProcess

P4NETEM = Path(sys.executable).parent / "p4netem"
TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "constant-6mbit.trace"


def _env(switch: SwitchProcess) -> dict:
    return {**os.environ, "P4NETEM_ADDR": switch.grpc_addr}


def _run(switch: SwitchProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=60, env=_env(switch))


def test_run_plays_a_trace_on_a_queue_only_base(bare_switch: SwitchProcess, tmp_path) -> None:
    base = tmp_path / "mm-codel.yaml"
    base.write_text("name: mm-codel\nboth: {queue: 100, aqm: codel, delay: 10ms}\n")
    # Long enough to be read back while it plays on a loaded machine; stopped (Ctrl-C) once it has been.
    # default_sigint: a test run started under nohup or with `&` has SIGINT ignored, and the
    # command would inherit that and never see the Ctrl-C this test sends.
    run = subprocess.Popen(default_sigint([str(P4NETEM), "trace", "run", "--uplink", str(TRACE), "--downlink",
                                           str(TRACE), "--profile", str(base), "--window", "100ms",
                                           "--duration", "60s"]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(bare_switch))
    try:
        deadline = time.monotonic() + 45
        rules: list = []
        while not rules and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            r = _run(bare_switch, "show", "--json")
            assert r.returncode == 0, r
            rules = json.loads(r.stdout)["rules"]
        assert run.poll() is None, run.communicate()  # still playing: the base is in force while it runs
        [rule] = rules
        for direction in ("uplink", "downlink"):
            link = rule[direction]
            assert link["queue"] == {"packets": 100} and link["aqm"] == {"kind": "codel"}, link
            assert link["delay"] == "10ms" and link["rate"].endswith("bit") and "trace" not in link, link
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=30)
    assert run.returncode == 130 and "interrupted after" in err, (run.returncode, out, err)


def test_run_checks_a_base_as_load_does(bare_switch: SwitchProcess, tmp_path) -> None:
    library = tmp_path / "mm.yaml"
    library.write_text("profiles:\n"
                       "  - {name: mm-codel, both: {queue: 100, aqm: codel}}\n"
                       "  - {name: mm-fast, downlink: {rate: fast, queue: 20}, uplink: {rate: 1Mbit}}\n")
    # A direction without a trace still needs a rate for its queue, named as `load` names it.
    r = _run(bare_switch, "trace", "run", "--downlink", str(TRACE), "--profiles", str(library),
             "--profile", "mm-codel", "--window", "100ms", "--duration", "200ms")
    assert r.returncode == 1 and "profiles[0].uplink.queue: a queue limit needs a rate" in r.stderr, r
    assert 'profiles[1].downlink.rate: "fast" is not a rate' in r.stderr, r
    # With both traced, the library's queue-only profile plays (what it puts on: the test above).
    library.write_text("profiles:\n  - {name: mm-codel, both: {queue: 100, aqm: codel}}\n")
    r = _run(bare_switch, "trace", "run", "--uplink", str(TRACE), "--downlink", str(TRACE), "--profiles",
             str(library), "--profile", "mm-codel", "--window", "100ms", "--duration", "200ms", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["changes"] >= 1, r
