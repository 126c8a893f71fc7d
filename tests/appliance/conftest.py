"""Fixtures shared by the appliance tests."""

from __future__ import annotations

import pytest

from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port


@pytest.fixture
def health_lab(switch_bin, tmp_path):
    port = free_tcp_port("127.0.0.1")
    lab = TwoHostLab(binary=switch_bin, log_path=tmp_path / "switch.log",
                     switch_args=("--metrics-addr", f"127.0.0.1:{port}")).start()
    try:
        yield lab, f"http://127.0.0.1:{port}/metrics"
    finally:
        lab.close()
