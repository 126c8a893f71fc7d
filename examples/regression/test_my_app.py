"""Regression test of a small app under p4netem profiles (docs/regression.md).

    sudo .venv/bin/python -m pytest examples/regression --p4netem-baseline baseline/ --p4netem-save-baseline
    sudo .venv/bin/python -m pytest examples/regression --p4netem-baseline baseline/
"""

import os
import sys
import time
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("app_server.py")


@pytest.fixture
def app_url(p4netem_lab):
    """The app's server in the lab's server host; its delay from APP_DELAY_MS (a stand-in for a change)."""
    server = p4netem_lab.start(p4netem_lab.server, [sys.executable, str(SERVER), "--port", "8000",
                                                    "--delay-ms", os.environ.get("APP_DELAY_MS", "0")])
    for _ in range(100):  # until it answers
        probe = p4netem_lab.run(p4netem_lab.client, "curl -s -o /dev/null http://10.0.0.2:8000/", check=False)
        if probe.returncode == 0:
            return "http://10.0.0.2:8000"
        if server.poll() is not None:  # its output is shown with the failure
            pytest.fail(f"the app's server exited with code {server.returncode}")
        time.sleep(0.1)
    pytest.fail("the app's server did not start")


@pytest.mark.parametrize("p4netem_profile", ["lan", "lte", "hspa"], indirect=True)
def test_report_download(p4netem_lab, p4netem_profile, app_url, p4netem_baseline):
    times_ms = []
    for _ in range(3):
        r = p4netem_lab.run(p4netem_lab.client,
                            f"curl -s -o /dev/null -w %{{time_total}} {app_url}/report?bytes=20000")
        times_ms.append(float(r.stdout) * 1000)
    median_ms = sorted(times_ms)[1]
    assert median_ms < 10_000, f"{p4netem_profile}: {times_ms}"
    # Fails the test when the median is more than 25 % (+30 ms) above the stored baseline.
    p4netem_baseline.record("report_ms", median_ms, tolerance_pct=25, slack=30)
