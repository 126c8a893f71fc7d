"""Build the P4Runtime protobuf modules (p4netem.p4rt.proto) when one is first imported.

`import p4netem` installs this finder rather than building them: protobuf and the descriptors take
about 50 ms, which every `p4netem` command paid at start-up, `--help` included. Whatever imports
`p4.v1.p4runtime_pb2` (or `p4.v1.p4runtime_pb2_grpc`, which imports it) after p4netem gets the
modules p4netem.p4rt.proto builds in the fast runtime, as when p4netem built them at its import.
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

# The modules p4netem.p4rt.proto builds (its _MODULES), named here so that this module imports
# nothing of protobuf.
NAMES = frozenset({"p4.config.v1.p4types_pb2", "p4.config.v1.p4info_pb2", "p4.v1.p4data_pb2",
                   "p4.v1.p4runtime_pb2"})


class _Built:
    """The loader of a module p4netem.p4rt.proto has built: the import system takes it as it is."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        pass


class ProtoFinder:
    """A meta path finder (first on sys.meta_path) for NAMES: the first import of one builds them all."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname not in NAMES:
            return None
        from . import proto  # builds the four modules and puts them in sys.modules

        return ModuleSpec(fullname, _Built(proto.module(fullname)))


def install() -> None:
    if not any(isinstance(finder, ProtoFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, ProtoFinder())
