"""Interop: p4runtime-shell (a third-party P4Runtime client, in its own venv) drives p4netem-switch.

The client script runs as a subprocess under .venv-p4rt-shell (created by scripts/setup-p4rt-shell.sh
when missing); this test starts a real switch, runs the script and asserts on what it printed.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SWITCH = ROOT / "dataplane" / "target" / "release" / "p4netem-switch"
P4INFO = ROOT / "p4src" / "p4netem.p4info.txtpb"
SHELL_VENV = ROOT / ".venv-p4rt-shell"
CLIENT = Path(__file__).with_name("p4rt_shell_client.py")
DEVICE_ID = 1
CONTRACT_TABLES = {
    "P4netemIngress.port_map": 0x02000001,
    "P4netemIngress.l2_fwd": 0x02000002,
    "P4netemIngress.l2_learn": 0x02000003,
    "P4netemIngress.classifier": 0x02000004,
    "P4netemIngress.profile": 0x02000005,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"p4netem-switch exited with {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"p4netem-switch did not listen on {port} within {timeout} s")


@pytest.fixture(scope="module")
def shell_python() -> Path:
    subprocess.run([str(ROOT / "scripts" / "setup-p4rt-shell.sh")], check=True)
    return SHELL_VENV / "bin" / "python"


@pytest.fixture
def switch(tmp_path):
    assert SWITCH.exists(), f"{SWITCH} missing: build it with `cd dataplane && cargo build --release`"
    port = _free_port()
    proc = subprocess.Popen([str(SWITCH), "--grpc-addr", f"127.0.0.1:{port}",
                             "--device-id", str(DEVICE_ID)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_p4runtime_shell_sets_pipeline_writes_and_reads(shell_python, switch, tmp_path):
    # p4runtime-shell's setup() always sends a device-config blob with the P4Info
    # (SetForwardingPipelineConfig, VERIFY_AND_COMMIT, config.p4_device_config = the file's bytes).
    device_config = tmp_path / "p4netem-switch.bin"
    device_config.write_bytes(b"p4netem-switch\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    r = subprocess.run([str(shell_python), str(CLIENT), switch, str(DEVICE_ID), str(P4INFO),
                        str(device_config), "7", "9"],
                       capture_output=True, text=True, timeout=60, env=env)
    out = r.stdout
    assert r.returncode == 0, f"p4runtime-shell client failed:\n{out}\n{r.stderr}"

    tables = dict(re.findall(r"^TABLE (\S+) id=(0x[0-9a-f]{8})", out, re.M))
    assert {name: int(i, 16) for name, i in tables.items()} == CONTRACT_TABLES, out

    assert "INSERTED" in out.splitlines(), out
    dup = [line for line in out.splitlines() if line.startswith("DUPLICATE_")]
    assert dup and dup[0].startswith("DUPLICATE_REJECTED") and "ALREADY_EXISTS" in dup[0], out

    entries = re.findall(r"^ENTRY .*$", out, re.M)
    assert entries == [
        "ENTRY P4netemIngress.port_map standard_metadata.ingress_port=7 "
        "action=P4netemIngress.set_egress_port port=9"
    ], out
    assert "AFTER_DELETE 0" in out.splitlines(), out
