"""A SIGTERM that reaches a switch SwitchProcess just started is a clean stop (exit 0), even before
the switch's main: the switch blocks SIGINT/SIGTERM first thing in main and honours a pending one
after start-up (dataplane/src/main.rs `stop_signals`, tests/dataplane/test_stop_during_start.py),
but between the fork/exec and main (its dynamic loader) the signal's default action still killed it
(exit -15, no teardown). SwitchProcess now starts it with both signals blocked
(p4netem.stop_signals.held_for_children), so such a signal waits, pending, for main to hold it.

Not timed: the signal goes from SwitchProcess's `on_start`, called with the pid as soon as Popen
returns, i.e. right after the exec; before the fix, most of these cycles died by the signal (the
loader had not reached main), the others reached main first. Every one must now stop cleanly."""

from __future__ import annotations

import os
import re
import signal
import stat
from pathlib import Path

import pytest

from p4netem.lab import LabError, SwitchProcess

CYCLES = 20
STOPPED = re.compile(r"SIGTERM during start-up: shutting down")


def _blocked() -> set[int]:
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


@pytest.mark.parametrize("die_with_owner", [False, True], ids=["plain", "setpriv"])
def test_sigterm_right_after_the_exec_is_a_clean_stop(tmp_path, die_with_owner: bool) -> None:
    before = _blocked()
    failures: list[str] = []
    cycles = CYCLES if not die_with_owner else CYCLES // 2  # setpriv: the same mask, once more exec'd
    for cycle in range(cycles):
        log_path = tmp_path / f"switch-{cycle}.log"
        switch = SwitchProcess({}, log_path=log_path, extra_args=["--rt-priority", "0"],
                               die_with_owner=die_with_owner,
                               on_start=lambda pid: os.kill(pid, signal.SIGTERM))
        # The switch stops by itself at the end of its start-up; it may have bound its gRPC port by
        # then (start() returns) or not (start() says it ended during start-up).
        try:
            switch.start(timeout=60)
        except LabError as exc:
            assert "during start-up" in str(exc), exc
        assert switch.proc is not None
        try:
            code = switch.proc.wait(timeout=60)
        finally:
            switch.stop()
        log = log_path.read_text(errors="replace")
        if code != 0 or not STOPPED.search(log):
            failures.append(f"cycle {cycle}: exit status {code}\n{log[-800:]}")
        # The parent's own mask is as it was (the block is for the child only).
        assert _blocked() == before
    assert not failures, f"{len(failures)} of {cycles} early SIGTERMs were not a clean stop:\n" + "\n".join(failures[:3])


def test_the_mask_is_restored_when_the_switch_cannot_be_started(tmp_path, monkeypatch) -> None:
    """Popen raising (a binary that cannot be executed) leaves neither the signals blocked in the
    caller nor the switch's lab record behind."""
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path / "run"))
    binary = tmp_path / "p4netem-switch"
    binary.write_text("not a program\n")
    binary.chmod(stat.S_IRUSR | stat.S_IWUSR)
    before = _blocked()
    switch = SwitchProcess({}, binary=binary, log_path=tmp_path / "switch.log")
    with pytest.raises(PermissionError):
        switch.start(timeout=10)
    assert _blocked() == before
    assert signal.SIGTERM not in _blocked() and signal.SIGINT not in _blocked()
    assert list(Path(tmp_path / "run").glob("*.json")) == []
