"""The contract's P4Info text is parsed once per process (p4netem/p4rt/p4info_text.py).

Every command that talks to a switch parsed it twice, in pure Python (about 13 ms each): for the
pipeline's schema and for the P4Info the controller checks the switch's against. A file changed on
disk is parsed again; each caller gets its own message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from p4netem.p4rt.p4info import P4Info
from p4netem.p4rt.p4info_text import parse_file
from p4netem.schema import CONTRACT_P4INFO


def test_the_schema_and_the_controllers_p4info_parse_the_contract_once() -> None:
    code = ("import p4netem; from google.protobuf import text_format; calls = [];"
            "parse = text_format.Parse;"
            "text_format.Parse = lambda *a, **k: calls.append(1) or parse(*a, **k);"
            "from p4netem import schema; from p4netem.p4rt.p4info import P4Info;"
            "from p4netem import pipeline; pipeline.IMPAIRMENT_PARAMS; info = P4Info.load(schema.CONTRACT_P4INFO);"
            "assert info.message == schema.contract(), 'not the same P4Info';"
            "print(len(calls))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_each_caller_gets_its_own_message() -> None:
    first, second = parse_file(CONTRACT_P4INFO), parse_file(CONTRACT_P4INFO)
    assert first == second and first is not second
    first.ClearField("tables")
    assert parse_file(CONTRACT_P4INFO) == second and len(second.tables) > 0


def test_a_file_changed_on_disk_is_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "p4info.txtpb"
    path.write_text('pkg_info { arch: "one" }\n')
    assert P4Info.load(path).message.pkg_info.arch == "one"
    path.write_text('pkg_info { arch: "two, longer" }\n')
    os.utime(path, ns=(1, 1))  # even with an older modification time
    assert P4Info.load(path).message.pkg_info.arch == "two, longer"
    path.write_text("pkg_info { arch: \n")
    try:
        P4Info.load(path)
    except Exception as exc:  # still P4Info.load's error, naming the file
        assert type(exc).__name__ == "P4RuntimeError" and f"cannot parse P4Info {path}" in str(exc)
    else:
        raise AssertionError("a broken file parsed")
