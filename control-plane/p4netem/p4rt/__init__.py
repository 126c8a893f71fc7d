"""P4Runtime client layer: protos, P4Info lookups, entry builders, the client.

The names below are imported from their submodule when first used (p4netem.lazy_exports): the
client's grpc is not needed by everything that imports this package (the protos, the P4Info).
"""

from ..lazy_exports import lazy_exports

_EXPORTS = {
    ".client": ("CounterValue", "Digest", "P4RuntimeClient", "PacketIn"),
    ".encoding": ("decode", "encode", "to_int"),
    ".entries": ("Exact", "Lpm", "Optional", "Range", "TableEntryView", "Ternary", "build_action",
                 "build_counter_entry", "build_register_entry", "build_table_entry", "decode_table_entry",
                 "update"),
    ".errors": ("P4RuntimeError", "UpdateError", "WriteError"),
    ".p4info": ("P4Info",),
    ".tls": ("GrpcTls", "TlsConfigError"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
