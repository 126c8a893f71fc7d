"""Dump the P4Runtime protobuf descriptors as a serialized FileDescriptorSet.

Run by dataplane/build.rs: the Rust gRPC code is generated from the descriptors that the PyPI
`p4runtime` package ships, so no .proto file is copied into the repository and no protoc is
needed. The set holds p4/v1/p4runtime.proto, p4/config/v1/p4info.proto, p4/config/v1/p4types.proto,
google/rpc/status.proto and everything they import, dependencies before dependants.

Usage: dump_fds.py OUT_FILE
Prints the installed p4runtime package version, then the path of p4runtime_pb2.py, on stdout.
Exit status 3 means the Python packages are missing.
"""

import os
import sys

# p4runtime 1.6.0's generated modules are rejected by protobuf 7's C (upb) backend; the pure
# Python backend reads them. Must be set before google.protobuf is imported.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: dump_fds.py OUT_FILE", file=sys.stderr)
        return 2
    try:
        from importlib.metadata import version

        from google.protobuf import descriptor_pb2
        from google.rpc import status_pb2
        from p4.config.v1 import p4info_pb2, p4types_pb2
        from p4.v1 import p4runtime_pb2
    except ImportError as err:
        print(
            f"{sys.executable}: cannot import the P4Runtime protobuf modules ({err}).\n"
            "Install them with `make setup` (creates .venv with the PyPI packages p4runtime and "
            "grpcio), or point P4NETEM_PYTHON at an interpreter that has them.",
            file=sys.stderr,
        )
        return 3

    roots = [
        p4runtime_pb2.DESCRIPTOR,
        p4info_pb2.DESCRIPTOR,
        p4types_pb2.DESCRIPTOR,
        status_pb2.DESCRIPTOR,
    ]
    fds = descriptor_pb2.FileDescriptorSet()
    seen = set()

    def add(fd) -> None:
        # Post-order walk: a file is emitted after all of its imports.
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        fd.CopyToProto(fds.file.add())

    for root in roots:
        add(root)

    with open(sys.argv[1], "wb") as out:
        out.write(fds.SerializeToString())
    print(version("p4runtime"))
    print(p4runtime_pb2.__file__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
