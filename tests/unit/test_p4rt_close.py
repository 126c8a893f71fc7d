"""P4RuntimeClient.close() never waits forever for gRPC: a lab process told to stop once hung in
grpc's Channel.close, waiting for a call its SIGTERM had cut off, and outlived its driver."""

from __future__ import annotations

import threading
import time

import grpc

from p4netem.p4rt.client import _close_channel


def test_a_channel_close_that_does_not_return_is_left_after_the_timeout():
    release = threading.Event()

    class StuckChannel:
        """Stands in for the one behaviour under test: a close() that does not return."""
        def close(self) -> None:
            release.wait()

    t0 = time.monotonic()
    try:
        assert _close_channel(StuckChannel(), 0.2) is False
        assert time.monotonic() - t0 < 5
    finally:
        release.set()


def test_a_real_channel_closes_within_the_timeout():
    channel = grpc.insecure_channel("127.0.0.1:9")
    assert _close_channel(channel, 5.0) is True


def test_connecting_to_no_switch_leaves_no_traceback_from_grpc_threads():
    """grpc's connectivity-polling thread (channel_ready_future's) died with "ValueError: Cannot
    monitor channel state: Channel closed!" on stderr when the channel was closed under it: after
    some of the connection attempts to an address where no switch answers (a race; 40 tries)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import p4netem

    script = (
        "from p4netem.p4rt import P4RuntimeClient, P4RuntimeError\n"
        "for t in (0.02, 0.005, 0.001, 1e-6) * 10:\n"
        "    try:\n"
        "        P4RuntimeClient('127.0.0.1:1', timeout=t).connect()\n"
        "    except P4RuntimeError:\n"
        "        pass\n"
        "import time; time.sleep(0.5)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(p4netem.__file__).parents[1])}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "Channel closed" not in r.stderr and "Traceback" not in r.stderr, r.stderr
