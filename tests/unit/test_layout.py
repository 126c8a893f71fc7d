"""The layout's one rule: the studies (studies/, package p4netem_studies) are built on the control
plane (control-plane/, package p4netem), never the other way. The control plane reaches the study
commands only through the `p4netem.commands` entry points."""

from __future__ import annotations

import ast
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_control_plane_never_imports_the_studies():
    offenders = [f"{p.relative_to(ROOT)}: {m}"
                 for p in sorted((ROOT / "control-plane" / "p4netem").rglob("*.py"))
                 for m in _imported_modules(p) if m.split(".")[0] == "p4netem_studies"]
    assert not offenders, offenders


def test_the_study_modules_left_the_control_plane_package():
    for name in ("mininet", "web", "harness", "experiments"):
        assert not (ROOT / "control-plane" / "p4netem" / name).exists(), name
        assert (ROOT / "studies" / "p4netem_studies" / name / "__init__.py").is_file(), name


def test_the_study_commands_join_the_one_p4netem_command():
    from typer.main import get_command

    from p4netem.cli import COMMANDS_GROUP, app
    assert any(ep.value == "p4netem_studies.cli:register" for ep in entry_points(group=COMMANDS_GROUP))
    commands = set(get_command(app).commands)
    assert {"lab", "measure", "experiment", "apply", "switch"} <= commands
