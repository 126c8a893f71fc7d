"""`p4netem apply --mahimahi` against a running p4netem-switch (the CLI as users run it): mm-link's
traces are written into the switch's trace registers and the chain's profile is applied with each
direction's placement; read back, the switch holds the delay, loss, queue (CoDel included) and trace
of the chain.
A chain p4netem refuses writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from p4netem import pipeline as pl
from p4netem.control import Controller
from p4netem.control.trace import load_trace
from p4netem.lab import SwitchProcess

P4NETEM = Path(sys.executable).parent / "p4netem"
TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def run_cli(addr: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", P4NETEM_ADDR=addr)
    return subprocess.run([str(P4NETEM), *args], capture_output=True, text=True, timeout=60, env=env)


def test_apply_mahimahi_loads_the_traces_and_the_profile(bare_switch: SwitchProcess) -> None:
    addr = bare_switch.grpc_addr
    up, down = TRACES / "constant-6mbit.trace", TRACES / "steps-12-3mbit.trace"
    command = (f"mm-delay 20 mm-link {up} {down} mm-loss downlink 0.01 --uplink-queue=droptail "
               "--uplink-queue-args=packets=50 --downlink-queue codel "
               "--downlink-queue-args 'packets=100, bytes=60000, target=5, interval=100'")
    r = run_cli(addr, "apply", "--mahimahi", command)
    assert r.returncode == 0, r.stderr
    # mm-loss inside mm-link: Mahimahi loses downlink packets after the link, p4netem before its queue.
    assert r.stderr.startswith("warning: mm-loss downlink is inside mm-link"), r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"loaded the uplink trace {up}: 1000 opportunities over 2000 ms"), r.stdout
    assert lines[1].startswith(f"loaded the downlink trace {down}: 2500 opportunities over 4000 ms"), r.stdout
    assert lines[2].startswith("applied mahimahi to 1 rule(s)"), r.stdout

    with Controller.connect(addr, election_id=1, primary=False) as reader:
        (rule,) = reader.applied()
    profile = rule.profile
    assert profile is not None
    for link in (profile.uplink, profile.downlink):
        assert int(link.delay) == 20_000_000 and link.rate == 0
    # mm-link's codel queue: CoDel on the downlink trace's queue (target 5 ms, interval 100 ms).
    assert profile.uplink.aqm.kind.value == "tail-drop" and profile.downlink.aqm.kind.value == "codel"
    aqm = profile.downlink.aqm
    assert (int(aqm.target), int(aqm.interval), aqm.ecn) == (5_000_000, 100_000_000, False)
    assert profile.uplink.loss == 0 and abs(float(profile.downlink.loss) - 1) < 1e-6  # 32-bit fraction of 1 %
    assert profile.uplink.queue.packets == 50 and profile.uplink.queue.bytes == 0
    assert profile.downlink.queue.packets == 100 and int(profile.downlink.queue.bytes) == 60000
    placed = {d: getattr(profile, d).trace for d in ("uplink", "downlink")}
    assert (placed["uplink"].opportunities, placed["uplink"].period) == (1000, 2000)
    assert (placed["downlink"].opportunities, placed["downlink"].period) == (2500, 4000)
    assert placed["uplink"].cells != placed["downlink"].cells  # each trace in its own cells
    # The cells hold the traces' timestamps, as `trace load` writes them (first, middle and last).
    with Controller.connect(addr, election_id=1, primary=False) as reader:
        for direction, path in (("uplink", up), ("downlink", down)):
            want, base = load_trace(path).opportunities_ms, placed[direction].cells
            for i in (0, len(want) // 2, len(want) - 1):
                assert reader.client.read_register(pl.TRACE_OPPORTUNITY_MS, base + i) == {base + i: want[i]}

    shown = json.loads(run_cli(addr, "show", "--json").stdout)["rules"][0]
    assert shown["uplink"]["delay"] == "20ms" and shown["downlink"]["trace"]["opportunities"] == 2500

    # Refused chains and missing traces write nothing: exit 1, the rule as it was.
    for bad, message in ((f"mm-delay 5 mm-link {up} {down} --uplink-queue=drophead --uplink-queue-args=packets=9",
                          "error: mahimahi command: --uplink-queue=drophead: is not supported"),
                         (f"mm-delay 5 mm-link {up} {TRACES / 'missing.trace'}",
                          f"error: mahimahi command: mm-link downlink trace {TRACES / 'missing.trace'}: cannot read it"),
                         ("mm-delay 5 mm-onoff uplink 1 1 mm-onoff uplink 2 2",
                          "error: mahimahi command: mm-onoff uplink 2 2: a second mm-onoff on the uplink")):
        r = run_cli(addr, "apply", "--mahimahi", bad)
        assert r.returncode == 1 and r.stderr.startswith(message), r.stderr
    again = json.loads(run_cli(addr, "show", "--json").stdout)["rules"][0]
    assert again == shown


def test_apply_mahimahi_onoff_programs_the_on_off_link(bare_switch: SwitchProcess) -> None:
    """mm-onoff: the switch holds that direction's on/off link and reads it back as written."""
    addr = bare_switch.grpc_addr
    r = run_cli(addr, "apply", "--mahimahi", "mm-delay 10 mm-onoff uplink 10 2.5")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    with Controller.connect(addr, election_id=1, primary=False) as reader:
        (rule,) = reader.applied()
    profile = rule.profile
    assert profile is not None and profile.downlink.onoff is None
    onoff = profile.uplink.onoff
    assert (int(onoff.mean_on), int(onoff.mean_off)) == (10 * 10**9, 2_500_000_000)
    shown = json.loads(run_cli(addr, "show", "--json").stdout)["rules"][0]
    assert shown["uplink"]["onoff"] == {"mean_on": "10s", "mean_off": "2.5s"}, shown["uplink"]
