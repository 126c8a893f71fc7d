"""P4Runtime client layer: protos, P4Info lookups, entry builders, the client."""

from .client import CounterValue, Digest, P4RuntimeClient, PacketIn
from .encoding import decode, encode, to_int
from .entries import (
    Exact,
    Lpm,
    Optional,
    Range,
    TableEntryView,
    Ternary,
    build_action,
    build_counter_entry,
    build_register_entry,
    build_table_entry,
    decode_table_entry,
    update,
)
from .errors import P4RuntimeError, UpdateError, WriteError
from .p4info import P4Info
from .tls import GrpcTls, TlsConfigError

__all__ = [
    "CounterValue",
    "Digest",
    "Exact",
    "GrpcTls",
    "Lpm",
    "Optional",
    "P4Info",
    "P4RuntimeClient",
    "P4RuntimeError",
    "PacketIn",
    "Range",
    "TableEntryView",
    "TlsConfigError",
    "Ternary",
    "UpdateError",
    "WriteError",
    "build_action",
    "build_counter_entry",
    "build_register_entry",
    "build_table_entry",
    "decode",
    "decode_table_entry",
    "encode",
    "to_int",
    "update",
]
