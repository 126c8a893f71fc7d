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
