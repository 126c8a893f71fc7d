"""Fixtures of the Mininet lab tests: one inline lab (client -- p4netem switch -- server) for the
session, with nginx and the SPDY server on the server host carrying generated pages (lab_env.py
has the pages and the load helper).

Tests set the profile and the server initial window they need (`weblab.set(...)`): applying a
profile is one P4Runtime Write, so sharing the lab costs nothing in independence and saves
starting servers for every test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from p4netem_studies.harness.endpoints import Endpoints, SiteContent
from p4netem_studies.harness.tcp import tune_hosts
from p4netem_studies.mininet import load_topology

from lab_env import BIG, DEMO, SMALL, TWO_ORIGINS, WebLab


@pytest.fixture(scope="session")
def weblab(tmp_path_factory: pytest.TempPathFactory, switch_bin: str) -> Iterator[WebLab]:
    if os.geteuid() != 0:
        pytest.fail("lab tests need root (namespaces, raw sockets)", pytrace=False)
    from p4netem_studies.mininet.lab import MininetLab
    tmp = tmp_path_factory.mktemp("weblab")
    content = SiteContent.generate([DEMO, SMALL, BIG, TWO_ORIGINS], tmp / "content")
    topo = load_topology("inline").expand()
    with MininetLab(topo, binary=switch_bin, log_dir=tmp / "logs") as lab, \
            Endpoints(lab, content, workdir=tmp / "endpoints") as endpoints:
        tune_hosts(lab)
        yield WebLab(lab, endpoints, content, tmp)


@pytest.fixture(scope="session")
def e5_h2_slice(tmp_path_factory: pytest.TempPathFactory):
    """A slice of E5's quick variant, run once for the session: HTTP/2 over TLS on idle HSPA,
    pre-woken HSPA and idle LTE, two loads each, on one lab (`experiment run ... --parallel 1`).
    test_lab_report.py writes its report and test_lab_experiments.py checks its congestion
    control (CUBIC, which the machine does not allow): they only read its files, and one run
    instead of two saves a lab and its loads. Returns (the result directory, the completed
    process, the machine's tcp_allowed_congestion_control read before the run)."""
    import subprocess
    import sys
    from pathlib import Path

    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text()
    out = tmp_path_factory.mktemp("e5-slice") / "e5"
    proc = subprocess.run([str(Path(sys.executable).parent / "p4netem"), "experiment", "run",
                           "e5-cellular", "--quick", "--reps", "2", "--only", "client=h2",
                           "--parallel", "1", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})
    return out, proc, allowed
