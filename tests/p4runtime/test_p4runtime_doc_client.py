"""docs/p4runtime.md "Your own client": the example, as a user copies it into a file and runs
it with the venv's Python, against a real (bare) switch. Without `import p4netem` first, the
PyPI p4runtime wheel's modules do not import under the venv's protobuf, which the page did not
say: a plain client written from it failed at its first import."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "p4runtime.md"


def _example() -> str:
    text = DOC.read_text()
    section = text.split("## Your own client", 1)
    assert len(section) == 2, "docs/p4runtime.md has no 'Your own client' section"
    block = re.search(r"```python\n(.*?)```", section[1], re.S)
    assert block, "no Python example in 'Your own client'"
    return block.group(1)


def test_the_documented_client_example_runs(bare_switch, tmp_path):
    script = tmp_path / "my_client.py"
    script.write_text(_example().replace("127.0.0.1:9559", bare_switch.grpc_addr))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines() == ["arbitration: 0", "read back: True"], res.stdout


def test_the_wheels_modules_alone_do_not_import_which_the_page_says():
    res = subprocess.run([sys.executable, "-c", "from p4.v1 import p4runtime_pb2"],
                         capture_output=True, text=True, timeout=60)
    if res.returncode == 0:
        return          # a p4runtime wheel regenerated for this protobuf: nothing to warn of
    assert "Descriptors cannot be created directly" in res.stderr
    assert "Descriptors cannot be created directly" in DOC.read_text()
