"""Interop: finsy (a third-party asyncio P4Runtime library, in its own venv) drives p4netem-switch.

The client script (finsy_client.py) runs as a subprocess under .venv-finsy (created by
scripts/setup-finsy.sh when missing), one step at a time; between steps this test sends traffic
between the lab's two hosts through the switch. The lab's own controller hands the switch over:
it programmed it and closed its stream, and finsy (election id 10 > the lab's 1) becomes primary
and commits its pipeline, which clears the lab's entries.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from pings import ping

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.paths import p4info_path

ROOT = Path(__file__).resolve().parents[2]
FINSY_VENV = ROOT / ".venv-finsy"
CLIENT = Path(__file__).with_name("finsy_client.py")
MS = 1_000_000
DELAY = 20 * MS  # finsy_client.DELAY_NS: the uplink delay of profile 7 after finsy's MODIFY
PINGS = 5


@pytest.fixture(scope="module")
def finsy_python() -> Path:
    subprocess.run([str(ROOT / "scripts" / "setup-finsy.sh")], check=True)
    return FINSY_VENV / "bin" / "python"


def finsy_step(python: Path, lab: TwoHostLab, step: str) -> str:
    """Runs one step of finsy_client.py against the lab's switch; returns what it printed."""
    assert lab.switch is not None
    # The finsy venv's interpreter must not see .venv's packages (PYTHONPATH) or its venv.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    r = subprocess.run([str(python), str(CLIENT), lab.switch.grpc_addr, str(lab.switch.device_id),
                        str(p4info_path()), step],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, (f"finsy step {step} failed:\n{r.stdout}\n{r.stderr}\n"
                               f"switch log:\n{lab.switch.log_tail()}")
    assert re.search(r"^PRIMARY True P4RUNTIME \d", r.stdout, re.M), r.stdout
    return r.stdout


def line(out: str, key: str) -> str:
    found = [ln for ln in out.splitlines() if ln.startswith(key + " ") or ln == key]
    assert len(found) == 1, f"expected one {key!r} line in:\n{out}"
    return found[0]


def packets(out: str, index: int) -> int:
    m = re.fullmatch(rf"COUNTER profile_in {index} packets (\d+) bytes (\d+)",
                     line(out, f"COUNTER profile_in {index}"))
    assert m, out
    return int(m.group(1))


def test_finsy_programs_reads_and_clears_the_switch(finsy_python, lab: TwoHostLab):
    # Hand over: the lab's controller leaves, so nobody is primary until finsy arbitrates.
    assert lab.client is not None
    lab.client.close()

    out = finsy_step(finsy_python, lab, "program")
    assert line(out, "ENTRIES_AFTER_COMMIT") == "ENTRIES_AFTER_COMMIT 0", out  # VERIFY_AND_COMMIT clears
    assert line(out, "VERIFY") == "VERIFY OK", out  # our P4Info with an empty device config
    bad = line(out, "VERIFY_BAD")  # refused, naming the difference
    assert bad.startswith("VERIFY_BAD INVALID_ARGUMENT ") and "meta.ipv4_src" in bad, out
    assert "32 expected, got 16" in bad, out
    assert line(out, "READBACK") == "READBACK 7 equal", out  # also: VERIFY kept the entries
    assert line(out, "DUPLICATE") == "DUPLICATE UNKNOWN ALREADY_EXISTS", out
    assert line(out, "MODIFIED") == f"MODIFIED delay_ns {DELAY}", out
    assert line(out, "REGISTER") == f"REGISTER dist_table {3 * 4096 + 7} {0x1234}", out
    assert "PROGRAMMED" in out.splitlines(), out

    # finsy's entries carry traffic, with the delay of its MODIFY (not the 1 ms it inserted).
    assert ping(lab.h1, lab.h2, PINGS) == (PINGS, PINGS)
    probe = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=20, rate=50, port=9100)
    assert probe.lost == 0, f"{probe.lost} of 20 lost"
    # A lower bound only: the switch holds every packet the full delay, however busy the host.
    assert min(probe.delays_ns) >= DELAY - 0.2 * MS, f"a packet took only {min(probe.delays_ns) / MS:.3f} ms"

    # A new finsy session with no P4Info of its own: it takes the switch's, which is the one
    # committed; the counters saw the traffic.
    out = finsy_step(finsy_python, lab, "counters")
    assert line(out, "P4INFO_FROM_SWITCH") == "P4INFO_FROM_SWITCH same", out
    assert line(out, "ENTRIES") == "ENTRIES 7", out
    assert packets(out, 14) >= PINGS + 20, out  # profile 7 uplink: the echo requests and the probe
    assert packets(out, 15) >= PINGS, out  # profile 7 downlink: the echo replies

    # The hosts' traffic falls to the classifier's default rule, now a profile losing everything.
    out = finsy_step(finsy_python, lab, "drop")
    assert line(out, "DEFAULT classifier") == \
        "DEFAULT classifier set_profile(profile_id=0x9, direction=0x0, ue_id=0x0)", out
    assert ping(lab.h1, lab.h2, PINGS) == (PINGS, 0)

    out = finsy_step(finsy_python, lab, "clear")
    assert packets(out, 18) >= PINGS, out  # the lost pings did reach profile 9 uplink
    assert line(out, "AFTER_DELETE_ALL") == "AFTER_DELETE_ALL 0", out
    # delete_all reset the default rule to the program's (profile 0, which has no impairment).
    assert line(out, "DEFAULT classifier") == \
        "DEFAULT classifier set_profile(profile_id=0x0, direction=0x0, ue_id=0x0)", out
    assert "FORWARDING" in out.splitlines(), out
    assert ping(lab.h1, lab.h2, PINGS) == (PINGS, PINGS)
