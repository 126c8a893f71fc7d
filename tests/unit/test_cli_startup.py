"""`p4netem` starts without importing what the command does not need.

Every command, `--help` included, took about a second to start: importing the command line
imported grpc, the P4Runtime protobufs, the controller, every pydantic model (built at import) and
the studies' experiment definitions, and parsed the contract's P4Info. Users script the command in
loops and the tests run it hundreds of times. Each case here runs the command in a fresh
interpreter and checks which modules it imported and which pydantic models it built, not how
long it took (the machine is shared and noisy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Run the command in this interpreter as the `p4netem` script does, then write what was imported.
RUNNER = """
import json, sys
argv, report = sys.argv[1:-1], sys.argv[-1]
sys.argv = ["p4netem", *argv]
code = 0
try:
    from p4netem.cli import main
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
built = []
pydantic = sys.modules.get("pydantic")
for name, module in list(sys.modules.items()):
    if pydantic is None or not name.startswith("p4netem"):
        continue
    for value in list(vars(module).values()):
        if (isinstance(value, type) and issubclass(value, pydantic.BaseModel) and value.__module__ == name
                and value.__pydantic_complete__):
            built.append(f"{name}.{value.__qualname__}")
with open(report, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules), "built": sorted(built)}, f)
"""

# Needed by commands that talk to a switch (or by none of these): never to start.
SWITCH_ONLY = ("grpc", "google.protobuf", "p4.v1.p4runtime_pb2", "p4netem.control.controller",
               "p4netem.p4rt.client")
NEVER = ("p4netem_studies.experiments.definition", "numpy", "matplotlib", "fastapi", "uvicorn",
         "prometheus_client")


def run(tmp_path: Path, *args: str) -> dict:
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-c", RUNNER, *args, str(report)], capture_output=True, text=True,
                          timeout=120)
    assert report.exists(), proc.stderr
    return json.loads(report.read_text()) | {"stderr": proc.stderr}


def imported(result: dict, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in result["modules"]]


@pytest.mark.parametrize("args", [["--help"], ["profiles", "--help"], ["apply", "--help"], ["lab", "--help"]])
def test_help_imports_no_switch_code_and_builds_no_model(tmp_path: Path, args: list[str]) -> None:
    result = run(tmp_path, *args)
    assert result["code"] == 0, result["stderr"]
    assert imported(result, SWITCH_ONLY + NEVER + ("p4netem.profiles.profile",)) == []
    assert result["built"] == []  # the models are built when first used (defer_build)


@pytest.mark.parametrize("args", [["profiles", "list"], ["profiles", "show", "lte"]])
def test_profiles_need_no_switch_code_nor_the_p4info(tmp_path: Path, args: list[str]) -> None:
    """Profiles are read and validated without grpc, the protobufs (the contract's P4Info is
    parsed when a profile is first encoded for a switch) or the controller."""
    result = run(tmp_path, *args)
    assert result["code"] == 0, result["stderr"]
    assert imported(result, SWITCH_ONLY + NEVER) == []
    assert "p4netem.profiles.profile" in result["modules"]


# Needed only by commands that play a timeline or a trace (timeline, trace, replay, apply --mahimahi):
# timeline.py builds the Profile model at import (its OUTAGE profile).
TIMELINE = ("p4netem.control.timeline", "p4netem.control.trace")


def test_the_controller_imports_no_timeline_code() -> None:
    """Every command that talks to a switch imports the controller, which imported the trace and
    timeline modules (for a type annotation) and so built the Profile model: about 10-20 ms of each
    show, stats and apply."""
    code = "import sys, p4netem.control.controller; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [m for m in TIMELINE if m in out.stdout.split()] == []


@pytest.mark.parametrize("args", [["show"], ["stats", "--once"], ["apply", "--netem", "delay 10ms"]])
def test_switch_commands_import_no_timeline_code(tmp_path: Path, args: list[str]) -> None:
    """show, stats and apply with a netem profile, as far as a switch that is not there (exit 3):
    the controller and the client, not the timeline and trace modules."""
    result = run(tmp_path, *args, "-s", "127.0.0.1:1")
    assert result["code"] == 3, result["stderr"]
    assert "p4netem.control.controller" in result["modules"]
    assert imported(result, TIMELINE + NEVER) == []


def test_show_without_a_switch_imports_no_study_code(tmp_path: Path) -> None:
    """A `show` that finds no switch (exit 3) imports the client, not the studies, the web server,
    the switch's metrics reader or numpy."""
    result = run(tmp_path, "show", "-s", "127.0.0.1:1")
    assert result["code"] == 3, result["stderr"]
    assert "error: switch 127.0.0.1:1: UNAVAILABLE" in result["stderr"]
    assert imported(result, NEVER) == []
    assert "p4netem.control.controller" in result["modules"]


# The command modules (cli/lazy_group.py: a command imports its own module only) and the studies'.
COMMAND_MODULES = tuple(f"p4netem.cli.{m}" for m in (
    "apply_cmd", "distribution_cmd", "forward_cmd", "host_cmd", "profiles_cmd", "radio_cmd", "replay_cmd",
    "show_cmd", "switch_cmd", "timeline_cmd", "trace_cmd", "web_cmd")) + ("p4netem_studies",)


def test_import_of_the_command_line_imports_no_command() -> None:
    """`import p4netem.cli` imports typer and what every command shares: no command module, nor
    the entry points' scan (importlib.metadata) that finds the studies' commands, nor pydantic."""
    code = "import sys, p4netem.cli; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    modules = set(out.stdout.split())
    assert [m for m in COMMAND_MODULES + SWITCH_ONLY + NEVER + ("pydantic", "importlib.metadata")
            if m in modules] == []


@pytest.mark.parametrize("args, own", [
    (["set", "--help"], "apply_cmd"), (["apply", "--help"], "apply_cmd"), (["stats", "--help"], "show_cmd"),
    (["timeline", "check", "--help"], "timeline_cmd"), (["profiles", "show", "lte"], "profiles_cmd"),
    (["show", "-s", "127.0.0.1:1"], "show_cmd")])
def test_a_command_imports_its_own_module_only(tmp_path: Path, args: list[str], own: str) -> None:
    """`p4netem set ...` imports apply_cmd (and what it imports: show imports apply's options), not
    the other commands, nor the studies' (found through the installed packages' entry points).
    (importlib.metadata itself is imported by pydantic, which typer uses to convert options.)"""
    result = run(tmp_path, *args)
    assert result["code"] in (0, 3), result["stderr"]
    assert f"p4netem.cli.{own}" in result["modules"]
    allowed = {"show_cmd": {"apply_cmd", "radio_cmd"}, "timeline_cmd": {"apply_cmd"}}.get(own, set()) | {own}
    others = [m for m in COMMAND_MODULES if m.rsplit(".", 1)[-1] not in allowed]
    assert imported(result, tuple(others)) == []


def test_a_command_of_the_studies_is_found_through_its_entry_point(tmp_path: Path) -> None:
    result = run(tmp_path, "lab", "--help")
    assert result["code"] == 0, result["stderr"]
    assert "p4netem_studies.cli.lab_cmd" in result["modules"]
    # The studies' commands import cli.signals to build their help; the lab code (its namespaces,
    # its records) is imported by the commands that build a lab.
    assert imported(result, ("p4netem.lab.netns", "p4netem.lab.owner") + TIMELINE + SWITCH_ONLY) == []


def _eager_app():
    """The command line as typer builds it when every module registers on the root app at import,
    as p4netem.cli did before it built its commands lazily."""
    import copy
    import importlib

    import typer

    from p4netem import cli

    eager = typer.Typer(add_completion=False)
    eager.info = copy.copy(cli.app.info)
    eager.info.cls = None
    eager.registered_callback = cli.app.registered_callback
    for name, module_name in cli.COMMANDS.items():
        module = importlib.import_module(f"p4netem.cli.{module_name}")
        if any(i.name == name for i in eager.registered_commands + eager.registered_groups):
            continue
        if hasattr(module, "register"):
            module.register(eager)
        else:
            eager.add_typer(module.app, name=name)
    cli.register_other_commands(eager)
    return eager


def test_the_lazy_commands_are_those_typer_builds_from_the_registrations(monkeypatch: pytest.MonkeyPatch) -> None:
    """cli.COMMANDS names every command the modules register, in typer's order, and each built
    lazily has the help (and so the options) typer gives it built at once, every subcommand too."""
    import typer.main
    from typer.testing import CliRunner

    from p4netem.cli import app

    monkeypatch.setenv("COLUMNS", "120")
    eager_app = _eager_app()
    eager = typer.main.get_command(eager_app)
    assert list(typer.main.get_command(app).commands) == list(eager.commands)
    paths = [[]]
    for name, command in eager.commands.items():
        paths += [[name]] + [[name, sub] for sub in getattr(command, "commands", {})]
    runner = CliRunner()
    for path in paths:
        expected = runner.invoke(eager_app, [*path, "--help"], prog_name="p4netem")
        got = runner.invoke(app, [*path, "--help"], prog_name="p4netem")
        assert (got.exit_code, got.output) == (expected.exit_code, expected.output), path
        assert expected.exit_code == 0 and "Usage: p4netem" in expected.output, path


def test_import_p4netem_loads_the_protobufs_on_first_use() -> None:
    """`import p4netem` no longer builds the P4Runtime messages, but a `p4.v1` module imported
    after it is still the one built in the fast runtime (p4netem.p4rt.proto_import)."""
    code = ("import sys, p4netem; assert 'google.protobuf' not in sys.modules, 'built at import';"
            "from p4.v1 import p4runtime_pb2_grpc, p4runtime_pb2;"
            "from p4netem.p4rt.proto import p4runtime_pb2 as ours;"
            "from google.protobuf.internal import api_implementation;"
            "assert p4runtime_pb2 is ours and api_implementation.Type() == 'upb';"
            "assert p4runtime_pb2_grpc.P4RuntimeStub;"
            "print(p4runtime_pb2.WriteRequest(device_id=7).SerializeToString().hex())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0807"


def test_guarded_maps_each_error_to_its_exit_code() -> None:
    """cli.common.guarded names the exception classes by module (it imports none of them): each
    still gets its message and exit code, subclasses included; anything else goes through."""
    import grpc
    import typer

    from p4netem.cli.common import EXIT_PROBLEM, EXIT_SWITCH, guarded
    from p4netem.control.rules import RuleError
    from p4netem.lab.netns import LabError
    from p4netem.p4rt.errors import P4RuntimeError
    from p4netem.profiles.errors import Problem, ProfileError

    cases = [(ProfileError([Problem("rate", "bad")]), EXIT_PROBLEM), (RuleError([Problem("ue", "bad")]), EXIT_PROBLEM),
             (P4RuntimeError(grpc.StatusCode.UNAVAILABLE, "down"), EXIT_SWITCH), (LabError("no"), EXIT_PROBLEM),
             (FileNotFoundError(2, "missing"), EXIT_PROBLEM)]
    for exc, code in cases:
        def fails(exc: Exception = exc) -> None:
            raise exc
        with pytest.raises(typer.Exit) as exit_info:
            guarded(fails)()
        assert exit_info.value.exit_code == code, exc
    with pytest.raises(KeyError):
        guarded(lambda: {}["x"])()


def test_run_recording_still_maps_a_failed_lab(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """cli.signals imports the lab code only when a recording runs (the studies' commands import
    the module to build their help): a lab that fails still exits 1 naming what failed."""
    import typer

    from p4netem.cli.signals import run_recording
    from p4netem.lab.netns import LabError

    def fails() -> None:
        raise LabError("no namespace")

    with pytest.raises(typer.Exit) as exit_info:
        run_recording("measure", tmp_path, fails)
    assert exit_info.value.exit_code == 1
    assert "measure failed: no namespace" in capsys.readouterr().err
