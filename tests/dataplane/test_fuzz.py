"""The short fuzz run of `make test` (the long one is `make fuzz`: 10^6 frames, 10^5 requests):
malformed frames and mutated P4Runtime requests into a running switch with a probe flow; the
switch never exits, answers every request with a status, and forwards every probe (issue 13)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fuzz  # noqa: E402


def test_short_fuzz_run_no_crash_no_probe_loss(tmp_path: Path) -> None:
    result = fuzz.run(frames=20_000, requests=2_000, seed=1313, log_path=tmp_path / "switch.log")
    assert result["fuzz_crashes"] == 0, (tmp_path / "switch.log").read_text()[-3000:]
    # (The sending kernel refuses some, e.g. frames shorter than an Ethernet header.)
    assert result["fuzz_frames"] >= 15_000 and result["fuzz_requests"] == 2_000, result
    # Every frame the sending socket took reached the switch (its ring, or the kernel fast path),
    # but for the VLAN frames too short for their tag, which the receiving kernel frees first.
    assert result["fuzz_frames_untaggable"] > 0, result
    assert result["fuzz_frames_unaccounted"] == 0, result
    assert result["fuzz_probe_loss"] == 0 and result["fuzz_probes"] > 20, result
    # Every request got an answer with a status: P4Runtime's refusals, the batch error (UNKNOWN),
    # INTERNAL for bytes that are no protobuf (gRPC's status for an undecodable request); never
    # UNAVAILABLE or DEADLINE_EXCEEDED (a server that died or hung).
    status = result["fuzz_request_status"]
    assert set(status) <= {"OK", "UNKNOWN", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE", "ALREADY_EXISTS",
                           "PERMISSION_DENIED", "UNIMPLEMENTED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                           "INTERNAL"}, status
    assert status.get("INTERNAL", 0) < 2_000 and len(status) >= 4, status
