"""The P4Runtime messages load into the fast protobuf runtime and under their canonical names."""

from __future__ import annotations

import subprocess
import sys

from google.protobuf.internal import api_implementation

import p4netem  # noqa: F401
from p4netem.p4rt.proto import p4info_pb2, p4runtime_pb2


def test_fast_runtime_and_canonical_modules() -> None:
    assert api_implementation.Type() == "upb"
    import p4.v1.p4runtime_pb2 as canonical
    import p4.v1.p4runtime_pb2_grpc as grpc_module

    assert canonical.WriteRequest is p4runtime_pb2.WriteRequest
    assert grpc_module.P4RuntimeStub is not None
    assert p4runtime_pb2.Update.INSERT == 1
    assert p4runtime_pb2.SDN_PORT_CPU == p4runtime_pb2.SdnPort.Value("SDN_PORT_CPU")
    info = p4info_pb2.P4Info()
    info.tables.add().preamble.name = "t"
    assert p4info_pb2.P4Info.FromString(info.SerializeToString()).tables[0].preamble.name == "t"


def test_messages_round_trip_with_the_package_python_modules() -> None:
    """Bytes we build parse with the PyPI package's own (pure-Python) modules: same wire schema."""
    req = p4runtime_pb2.WriteRequest(device_id=7)
    u = req.updates.add(type=p4runtime_pb2.Update.MODIFY)
    u.entity.table_entry.table_id = 0x02000001
    u.entity.table_entry.match.add(field_id=1).exact.value = b"\x01"
    data = req.SerializeToString()
    code = (
        "import sys, os; os.environ['PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION'] = 'python';"
        "from p4.v1 import p4runtime_pb2 as p;"
        "r = p.WriteRequest.FromString(sys.stdin.buffer.read());"
        "print(r.device_id, r.updates[0].type, r.updates[0].entity.table_entry.match[0].exact.value.hex())"
    )
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True).stdout
    assert out.decode().split() == ["7", "2", "01"]


def test_the_descriptor_is_read_without_parsing_the_whole_generated_file() -> None:
    """The quick read (tokenizing from `serialized_pb=` on) gives the bytes a full parse gives, for
    every generated file the loader reads; what it cannot read is None (the full parse is used)."""
    import ast
    import importlib.util
    from pathlib import Path

    from p4netem.p4rt.proto import _MODULES, _literal_after

    for module_name, _ in _MODULES:
        package, _, leaf = module_name.rpartition(".")
        source = (Path(importlib.util.find_spec(package).origin).parent / f"{leaf}.py").read_text()
        full = [ast.literal_eval(node.value) for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.keyword) and node.arg == "serialized_pb"]
        assert len(full) == 1 and _literal_after(source, "serialized_pb") == full[0], module_name
    assert _literal_after("f(serialized_pb=b'a'\n    b'b', x=1)", "serialized_pb") == b"ab"
    assert _literal_after("f(serialized_pb=_b('a'))", "serialized_pb") is None
    assert _literal_after("f(other=b'a')", "serialized_pb") is None
