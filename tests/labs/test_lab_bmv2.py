"""The bmv2 reference target in a Mininet lab: simple_switch_grpc running p4src compiled by
p4c-bm2-ss, programmed by the same lab code, forwards and impairs. p4c and bmv2 are not in this
machine's package registries, so here the test is skipped with that reason; it runs wherever
they are installed."""

from __future__ import annotations

import statistics

import pytest

from p4netem_studies.mininet import load_topology
from p4netem_studies.mininet.nodes import Bmv2Switch

from lab_env import delay_profile


def test_bmv2_lab_forwards_and_delays(tmp_path):
    ok, why = Bmv2Switch.available()
    if not ok:
        pytest.skip(why)
    from p4netem_studies.mininet.lab import MininetLab
    with MininetLab(load_topology("inline").expand(), target="bmv2",
                    log_dir=tmp_path / "logs") as lab:
        lab.run("client", ["ping", "-c", "2", "-W", "2", lab.ip("server")])
        lab.apply_profile(delay_profile(100))
        out = lab.run("client", ["ping", "-n", "-c", "5", "-i", "0.2", lab.ip("server")]).stdout
        rtts = [float(l.split("time=")[1].split()[0]) for l in out.splitlines() if "time=" in l]
        assert statistics.median(rtts) == pytest.approx(100, abs=20)
