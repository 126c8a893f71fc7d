"""P4Info text files, parsed once per process.

Why: protobuf parses text format in pure Python, about 13 ms for the contract's P4Info (26 KB) on
the 2-core development machine, and every command that talks to a switch parsed that file twice:
for the pipeline's schema (p4netem.schema) and for the P4Info the controller checks the switch's
against (P4Info.load). The parsed message is kept per file, as its binary serialization (parsed
again in well under a millisecond), under the file's inode, size and modification time: a file
changed on disk is read and parsed again. Each caller gets a message of its own, which it may change.

No grpc here: the schema is read by profile commands that never talk to a switch.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from google.protobuf import text_format

from .proto import p4info_pb2

__all__ = ["parse_file"]

_lock = threading.Lock()
_parsed: dict[tuple[str, int, int, int, int], bytes] = {}


def parse_file(path: str | Path) -> p4info_pb2.P4Info:
    """The P4Info message of a text-format file. Raises what reading and parsing raise (OSError,
    UnicodeDecodeError, text_format.ParseError); a file that fails is not remembered."""
    path = Path(path)
    # Stat before reading: a file replaced in between is keyed by its old stat, which the next
    # call's stat no longer matches, so it is read again.
    st = os.stat(path)
    key = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    message = p4info_pb2.P4Info()
    with _lock:
        cached = _parsed.get(key)
    if cached is not None:
        message.ParseFromString(cached)
        return message
    text_format.Parse(path.read_bytes().decode("utf-8"), message)
    with _lock:
        _parsed[key] = message.SerializeToString()
    return message
