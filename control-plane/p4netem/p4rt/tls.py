"""TLS for the P4Runtime channel: which CA to trust, which client certificate to present.

p4netem-switch serves plaintext only on loopback; on any other address it needs TLS, usually mutual
TLS (`--grpc-cert/--grpc-key/--grpc-client-ca` on the switch). A client then needs the CA that signed
the switch's certificate (`ca`) and, under mutual TLS, a certificate of its own (`cert`, `key`).

Every client of the project takes one `GrpcTls`; when given none it reads the environment
(P4NETEM_GRPC_CA, P4NETEM_GRPC_CERT, P4NETEM_GRPC_KEY, P4NETEM_GRPC_SERVER_NAME), so that the CLI's
`--grpc-*` options, labs, tests and scripts reach a secured switch the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

ENV_CA = "P4NETEM_GRPC_CA"
ENV_CERT = "P4NETEM_GRPC_CERT"
ENV_KEY = "P4NETEM_GRPC_KEY"
ENV_SERVER_NAME = "P4NETEM_GRPC_SERVER_NAME"


class TlsConfigError(ValueError):
    """The TLS options do not fit together or name a file that cannot be used (one-line message)."""


@dataclass(frozen=True)
class GrpcTls:
    """How to secure one P4Runtime channel. `ca`: PEM file of the CA(s) that signed the switch's
    certificate (None: the system's roots). `cert`/`key`: this client's certificate and key (PEM),
    for mutual TLS. `server_name`: the name to check the switch's certificate against when it is
    not the host part of the address (e.g. connecting by IP to a certificate issued for a name)."""

    ca: Path | str | None = None
    cert: Path | str | None = None
    key: Path | str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        # Paths as the docs write them (`GrpcTls(ca="ca.pem", ...)`) are taken as Paths; "" is none,
        # as an empty P4NETEM_GRPC_* variable is. (A str reached _read and failed with AttributeError.)
        for name in ("ca", "cert", "key"):
            value = getattr(self, name)
            if isinstance(value, (str, os.PathLike)) and not isinstance(value, Path):
                object.__setattr__(self, name, _path(os.fspath(value)))
        if (self.cert is None) != (self.key is None):
            given, missing = ("--grpc-cert", "--grpc-key") if self.cert is not None else ("--grpc-key", "--grpc-cert")
            raise TlsConfigError(f"{given} needs {missing} (a client certificate and its private key go together)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GrpcTls | None:
        """The TLS the environment asks for, or None (plaintext) if it names none."""
        env = os.environ if env is None else env
        values = {name: env.get(var) or None for name, var in
                  (("ca", ENV_CA), ("cert", ENV_CERT), ("key", ENV_KEY), ("server_name", ENV_SERVER_NAME))}
        if not any(values.values()):
            return None
        return cls(ca=_path(values["ca"]), cert=_path(values["cert"]), key=_path(values["key"]),
                   server_name=values["server_name"])

    def env(self) -> dict[str, str]:
        """The environment variables that make a child process use this TLS."""
        out = {ENV_CA: self.ca, ENV_CERT: self.cert, ENV_KEY: self.key, ENV_SERVER_NAME: self.server_name}
        return {k: str(v) for k, v in out.items() if v is not None}

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca, "--grpc-ca") if self.ca else None,
            private_key=_read(self.key, "--grpc-key") if self.key else None,
            certificate_chain=_read(self.cert, "--grpc-cert") if self.cert else None,
        )

    def channel_options(self) -> list[tuple[str, str]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []

    def describe(self) -> str:
        return "mutual TLS" if self.cert else "TLS"


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _read(path: Path, option: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{option} {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise TlsConfigError(f"{option} {path}: not a PEM file (no -----BEGIN line)")
    return data
