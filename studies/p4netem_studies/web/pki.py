"""Per-run certificates: a private CA and one server certificate for a page's host names.

Made fresh for every run (nothing reused, nothing installed system-wide): clients trust the CA file
(Python loaders, the SPDY agent) or the server key's SPKI hash (Chromium's
--ignore-certificate-errors-spki-list). The key type changes the size of the server's first TLS
flight, which matters in initial-window experiments, so it is a parameter and is recorded.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class ServerCert:
    ca_cert: Path      # PEM, what clients trust
    cert: Path         # PEM, the server certificate
    key: Path          # PEM, unencrypted server key
    spki_sha256: str   # base64 SHA-256 of the server's SubjectPublicKeyInfo (Chromium pinning)
    names: tuple[str, ...]
    key_type: str


def _key(key_type: str):
    if key_type == "rsa2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ec256":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"key type must be rsa2048 or ec256, not {key_type!r}")


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_server_cert(directory: str | Path, names: list[str], key_type: str = "rsa2048",
                     days: int = 2) -> ServerCert:
    """Write ca.pem, server.pem and server.key under `directory` for `names` (hosts or IPs)."""
    if not names:
        raise ValueError("a server certificate needs at least one name")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=days)

    ca_key = _key("ec256")
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "p4netem lab CA (per run)")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                         critical=True)
          .sign(ca_key, hashes.SHA256()))

    key = _key(key_type)
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))

    spki = key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    paths = ServerCert(d / "ca.pem", d / "server.pem", d / "server.key",
                       base64.b64encode(hashlib.sha256(spki).digest()).decode(), tuple(names),
                       key_type)
    paths.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(_pem_key(key))
    paths.key.chmod(0o600)
    return paths
