"""`p4netem --version` (-V): the installed package's version and the switch binary the commands
start, as users of tc (`tc -V`) and any CLI expect; before, it was "No such option" (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

P4NETEM = str(Path(sys.executable).parent / "p4netem")


def test_version_names_the_package_and_the_switch_binary(tmp_path) -> None:
    for flag in ("--version", "-V"):
        r = subprocess.run([P4NETEM, flag, "show"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "P4NETEM_SWITCH": str(tmp_path / "my-switch")})
        assert r.returncode == 0, r.stderr
        # Eager: printed before the command (`show`, which would need a switch) runs.
        assert r.stdout == f"p4netem {version('p4netem')} (switch binary: {tmp_path / 'my-switch'})\n", r.stdout
