"""p4netem: control plane of the P4-programmable network emulator.

Importing the package loads the P4Runtime protobuf messages into the fast protobuf runtime (see
p4netem.p4rt.proto); import p4netem before any `p4.v1` / `p4.config.v1` module.
"""

from .p4rt import proto as _proto  # noqa: F401  (must run before anything imports p4.v1.*)

__version__ = "0.1.0"
