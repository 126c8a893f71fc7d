"""The switch's default log (/tmp/p4netem-switch-PORT.log, SwitchProcess without `log_path`): every
switch the project's Python started left one behind after a normal stop, one file per lab, replay or
script run. Now a normal stop removes it; a log that tells something (the switch ended by itself, or
failed to start) stays, and a caller's own `log_path` is never removed."""

from __future__ import annotations

import signal
import socket

import pytest

from p4netem.lab import LabError, SwitchProcess

ARGS = ["--rt-priority", "0"]


def test_a_normal_stop_removes_the_default_log_and_keeps_a_callers(switch_bin: str, tmp_path) -> None:
    switch = SwitchProcess({}, binary=switch_bin, extra_args=ARGS).start()
    log = switch.log_path
    try:
        assert log is not None and log.exists(), log  # written while it runs (a crash would leave it)
    finally:
        code = switch.stop()
    assert code == 0, code  # a clean stop, even this soon after its start (main.rs stop_signals)
    assert not log.exists(), f"{log} left after a normal stop"
    assert switch.stop() == code  # a second stop (a lab's cleanup after the switch's) is harmless

    mine = tmp_path / "switch.log"
    switch = SwitchProcess({}, binary=switch_bin, log_path=mine, extra_args=ARGS).start()
    assert switch.stop() == 0
    assert mine.exists() and mine.stat().st_size > 0


def test_the_default_log_of_a_switch_that_died_stays(switch_bin: str) -> None:
    switch = SwitchProcess({}, binary=switch_bin, extra_args=ARGS).start()
    log = switch.log_path
    assert log is not None and switch.proc is not None
    try:
        switch.proc.send_signal(signal.SIGKILL)  # ends by itself as far as its owner knows: a crash
        switch.proc.wait(timeout=30)
        switch.stop()
        assert log.exists(), f"{log} of a switch that died was removed"
    finally:
        log.unlink(missing_ok=True)


def test_the_default_log_of_a_switch_that_failed_to_start_stays(switch_bin: str) -> None:
    with socket.socket() as other:  # its port taken: the switch exits during start-up
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        switch = SwitchProcess({}, binary=switch_bin, grpc_port=port, extra_args=ARGS)
        try:
            with pytest.raises(LabError, match="exited with code"):
                switch.start(timeout=30)
            assert switch.log_path is not None and switch.log_path.exists()
            assert str(port) in switch.log_path.read_text(errors="replace")
        finally:
            if switch.log_path is not None:
                switch.log_path.unlink(missing_ok=True)
