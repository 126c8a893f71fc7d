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
