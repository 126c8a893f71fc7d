"""examples/controller_api.py runs as documented against a real switch (so the example stays true)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from p4netem.lab import TwoHostLab

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "controller_api.py"


def test_controller_api_example_runs(lab: TwoHostLab) -> None:
    r = subprocess.run([sys.executable, str(EXAMPLE), "--switch", lab.switch.grpc_addr, "--election-id", "2",
                        "--keep"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "switched 1 rule(s)" in out
    for step in ("0.0 ms  apply lte", "200.0 ms  set downlink.rate=5Mbit, delay=40ms", "400.0 ms  outage 300ms",
                 "700.0 ms  end of outage, back to lte; apply weak-cell", "900.0 ms  apply lte"):
        assert step in out, out
    # The timeline ran on the default rule and ended on LTE; the phone kept LTE+200ms.
    assert "client any port 1 <-> server any port 2 ue 0: lte" in out
    assert "client 10.0.0.2 <-> server any ue 2: lte-200ms" in out
