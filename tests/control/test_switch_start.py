"""SwitchProcess.start() returns only once its own switch listens: a gRPC port picked free may be
taken by another process before the switch binds it (two labs starting at once, pytest-xdist
workers), and a connect to the port then reached the other process while this switch had failed."""

from __future__ import annotations

import socket

import pytest

from p4netem.lab import LabError, SwitchProcess


def test_a_port_taken_by_another_process_is_not_mistaken_for_the_switch(tmp_path) -> None:
    with socket.socket() as other:  # what another switch would be: something listening there
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        switch = SwitchProcess({}, grpc_port=port, log_path=tmp_path / "switch.log",
                               extra_args=["--rt-priority", "0"])
        with pytest.raises(LabError, match="exited with code") as failed:
            switch.start(timeout=30)
        assert not switch.running()
        # The switch's own words say why (its log's end is in the error).
        assert str(port) in str(failed.value), failed.value


def test_the_switch_is_found_listening_on_its_own_port(tmp_path) -> None:
    with SwitchProcess({}, log_path=tmp_path / "switch.log", extra_args=["--rt-priority", "0"]) as switch:
        with socket.create_connection(("127.0.0.1", switch.grpc_port), timeout=5):
            pass
