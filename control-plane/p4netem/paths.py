"""Where the repository's artefacts are: the switch binary and the P4Info.

The package is installed in editable mode from the repository (make setup), so the repository root
is two levels above this package. P4NETEM_SWITCH and P4NETEM_P4INFO override the defaults.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def switch_binary() -> Path:
    return Path(os.environ.get("P4NETEM_SWITCH", REPO_ROOT / "dataplane/target/release/p4netem-switch"))


def p4info_path() -> Path:
    return Path(os.environ.get("P4NETEM_P4INFO", REPO_ROOT / "p4src/p4netem.p4info.txtpb"))


def topologies_dir() -> Path:
    return Path(os.environ.get("P4NETEM_TOPOLOGIES", REPO_ROOT / "topologies"))
