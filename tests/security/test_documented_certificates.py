"""docs/security.md as a user follows it: the certificates made by its openssl lines, and its Python
example, which passes the files as strings.

Before, the doc gave only the CA's line and "sign a server and one client certificate with it": the
obvious `openssl x509 -req` without `-extfile` signs an X.509 v1 certificate, which the switch
(rustls) refuses at the handshake with no word in its log, the client seeing only UNAVAILABLE.
And `GrpcTls(ca="ca.pem", ...)`, as the doc writes it, failed with AttributeError ('str' object has
no attribute 'read_bytes') when the channel was made. A switch certificate that does not name the
host connected to got a hint naming only --grpc-ca, --grpc-cert and --grpc-key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from p4netem.control import Controller
from p4netem.lab import Resources, SwitchProcess, SwitchTls
from p4netem.p4rt import GrpcTls, P4RuntimeClient, P4RuntimeError

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def _documented_commands() -> list[str]:
    """The indented openssl and printf lines of the doc's "Certificates" paragraph, in order."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("\nCertificates:"):]
    return [line[4:] for line in section.splitlines() if line.startswith(("    openssl ", "    printf "))]


def test_paths_as_strings_as_the_doc_writes_them(tmp_path) -> None:
    ca = tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", "/CN=t", "-keyout", str(tmp_path / "ca.key"), "-out", str(ca)],
                   check=True, capture_output=True, timeout=60)
    tls = GrpcTls(ca=str(ca), cert=str(ca), key=str(tmp_path / "ca.key"))
    assert (tls.ca, tls.key) == (ca, tmp_path / "ca.key")
    tls.credentials()  # reads the files: AttributeError on a str before
    assert GrpcTls(ca="").ca is None  # as an empty P4NETEM_GRPC_CA is no CA


def test_the_documented_certificates_give_a_working_mutual_tls(switch_bin: str, tmp_path) -> None:
    commands = _documented_commands()
    for command in commands:
        r = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (command, r.stderr)
    files = {name: tmp_path / name for name in ("ca.pem", "switch.pem", "switch.key", "operator.pem", "operator.key")}
    missing = [name for name, path in files.items() if not path.exists()]
    assert not missing, f"the doc's lines {commands} made no {missing}"
    resources = Resources()
    switch = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "switch.log", resources=resources,
                           tls=SwitchTls(files["switch.pem"], files["switch.key"], files["ca.pem"]),
                           extra_args=["--rt-priority", "0", "--grpc-rt-priority", "0"])
    switch.start()
    try:
        # The doc's Python example, its paths as strings; then by the DNS name the certificate gives.
        tls = GrpcTls(ca=str(files["ca.pem"]), cert=str(files["operator.pem"]), key=str(files["operator.key"]))
        with Controller.connect(switch.grpc_addr, tls=tls, timeout=30) as ctl:
            ctl.apply("lte")
        named = GrpcTls(ca=tls.ca, cert=tls.cert, key=tls.key, server_name="switch1")
        with Controller.connect(f"localhost:{switch.grpc_port}", tls=named, timeout=30) as ctl:
            assert [r.profile.name for r in ctl.applied()] == ["lte"]
        # A name the certificate does not give: the hint names the option that fixes it.
        with pytest.raises(P4RuntimeError, match=r"names the host, else --grpc-server-name"):
            P4RuntimeClient(f"localhost:{switch.grpc_port}", tls=tls, timeout=4.0).connect(arbitrate=False)
    finally:
        switch.stop()
        resources.close()
