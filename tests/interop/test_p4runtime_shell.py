"""Interop: p4runtime-shell (a third-party P4Runtime client, in its own venv) drives p4netem-switch.

The client script runs as a subprocess under .venv-p4rt-shell (created by scripts/setup-p4rt-shell.sh
when missing); this test starts a real switch, runs the script and asserts on what it printed.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from p4netem.lab import PREFIX, Resources, SwitchProcess, disable_offloads, run, unique_token
from p4netem.paths import p4info_path

ROOT = Path(__file__).resolve().parents[2]
SHELL_VENV = ROOT / ".venv-p4rt-shell"
CLIENT = Path(__file__).with_name("p4rt_shell_client.py")
DEVICE_ID = 1
CONTRACT_TABLES = {
    "P4netemIngress.port_map": 0x02000001,
    "P4netemIngress.l2_fwd": 0x02000002,
    "P4netemIngress.l2_learn": 0x02000003,
    "P4netemIngress.classifier": 0x02000004,
    "P4netemIngress.profile": 0x02000005,
    "P4netemIngress.radio_profile": 0x02000006,
}


@pytest.fixture(scope="module")
def shell_python() -> Path:
    subprocess.run([str(ROOT / "scripts" / "setup-p4rt-shell.sh")], check=True)
    return SHELL_VENV / "bin" / "python"


@pytest.fixture
def switch(switch_bin: str, tmp_path):
    """A bare p4netem-switch (no pipeline pushed, no entries) on two veth ports, 1 and 2."""
    if os.geteuid() != 0:
        pytest.fail("the interop test needs root (veths, raw sockets)", pytrace=False)
    with Resources() as res:
        token = unique_token()
        ports = {}
        for n in (1, 2):
            a, b = f"{PREFIX}{token}i{n}", f"{PREFIX}{token}j{n}"
            res.veth(a, b)
            for dev in (a, b):
                run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"])
                disable_offloads(dev)
                run(["ip", "link", "set", dev, "up"])
            ports[n] = a
        sw = SwitchProcess(ports, binary=switch_bin, device_id=DEVICE_ID,
                           log_path=tmp_path / "switch.log", resources=res).start()
        try:
            yield sw
        finally:
            sw.stop()


def test_p4runtime_shell_sets_pipeline_writes_and_reads(shell_python, switch, tmp_path):
    # p4runtime-shell's setup() always sends a device-config blob with the P4Info
    # (SetForwardingPipelineConfig, VERIFY_AND_COMMIT, config.p4_device_config = the file's bytes).
    device_config = tmp_path / "p4netem-switch.bin"
    device_config.write_bytes(b"p4netem-switch\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    r = subprocess.run([str(shell_python), str(CLIENT), switch.grpc_addr, str(DEVICE_ID),
                        str(p4info_path()), str(device_config), "1", "2"],
                       capture_output=True, text=True, timeout=60, env=env)
    out = r.stdout
    assert r.returncode == 0, (f"p4runtime-shell client failed:\n{out}\n{r.stderr}\n"
                               f"switch log:\n{switch.log_tail()}")

    tables = dict(re.findall(r"^TABLE (\S+) id=(0x[0-9a-f]{8})", out, re.M))
    assert {name: int(i, 16) for name, i in tables.items()} == CONTRACT_TABLES, out

    assert "INSERTED" in out.splitlines(), out
    dup = [line for line in out.splitlines() if line.startswith("DUPLICATE_")]
    assert dup and dup[0].startswith("DUPLICATE_REJECTED") and "ALREADY_EXISTS" in dup[0], out

    entries = re.findall(r"^ENTRY .*$", out, re.M)
    assert entries == [
        "ENTRY P4netemIngress.port_map standard_metadata.ingress_port=1 "
        "action=P4netemIngress.set_egress_port port=2"
    ], out
    assert "AFTER_DELETE 0" in out.splitlines(), out
