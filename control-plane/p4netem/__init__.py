"""p4netem: control plane of the P4-programmable network emulator.

The P4Runtime protobuf messages are loaded into the fast protobuf runtime (see p4netem.p4rt.proto)
when first used: importing the package installs the import hook that builds them
(p4netem.p4rt.proto_import), so that `p4.v1.*` modules imported after p4netem are those. Import
p4netem before any `p4.v1` / `p4.config.v1` module.
"""

from .p4rt import proto_import as _proto_import

_proto_import.install()  # must come before anything imports p4.v1.*

__version__ = "0.1.0"
