"""The regression kit (docs/regression.md) under pytest-xdist (`pytest -n 2`), as test engineers
run it: two workers build labs at the same time, save baselines side by side (some of them under
node ids that read alike), and the end of the output lists, once, what every worker found.

One inner session saves, one compares: each a subprocess with real namespaces and real switches."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="p4netem_lab needs root (network namespaces)")

APP = """
    import json, os, pathlib, time
    import pytest

    OUT = pathlib.Path({out!r})
    VALUES = {{"lab-1": 10.0, "lab-2": 20.0, "a/b": 30.0, "a_b": 40.0, "a b": 50.0, "c": 60.0}}

    def measure(what, p4netem_baseline):
        (OUT / f"worker-{{list(VALUES).index(what)}}.json").write_text(
            json.dumps([what, os.environ["PYTEST_XDIST_WORKER"]]))
        bump = 1.5 if what in os.environ.get("REGRESS", "").split(",") else 1.0
        p4netem_baseline.record("m", VALUES[what] * bump)
        assert what not in os.environ.get("BREAK", "").split(","), f"{{what}} broke"

    # xdist's load scheduling hands each worker two consecutive tests to start with: lab-1 and
    # lab-2 start on different workers, and each waits for the other's lab, so both labs are up
    # at one time (the test checks that, and which worker ran what).
    @pytest.mark.parametrize("what", ["lab-1", "a/b", "lab-2", "a_b", "a b", "c"])
    def test_m(what, p4netem_baseline, request, tmp_path):
        if what.startswith("lab-"):
            lab(int(what[-1]), request.getfixturevalue("p4netem_lab"), tmp_path)
        measure(what, p4netem_baseline)

    def lab(n, p4netem_lab, tmp_path):
        lab = p4netem_lab._lab
        (OUT / f"lab-{{n}}.json").write_text(json.dumps({{
            "names": [h.ns.name for h in lab.hosts] + [h.switch_iface for h in lab.hosts],
            "grpc": lab.switch.grpc_addr, "tmp": str(tmp_path), "up": time.time()}}))
        deadline = time.monotonic() + 30
        while not (OUT / f"lab-{{3 - n}}.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # Its own switch: the profile applied here is the one its controller reads back.
        p4netem_lab.apply(["lan", "lte"][n - 1])
        assert [r.profile_name for r in p4netem_lab.controller.applied()] == [["lan", "lte"][n - 1]]
        p4netem_lab.run(p4netem_lab.client, "ping -c 1 -W 5 10.0.0.2")
        (OUT / f"lab-{{n}}.done").write_text(str(time.time()))
"""


def _session(pytester: pytest.Pytester, tmp_path: Path, name: str, *args: str) -> pytest.RunResult:
    # Its own --basetemp: a pytest that starts chmods /tmp/pytest-of-root (see test_regression_kit).
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", f"--basetemp={tmp_path / name}",
                                         f"--p4netem-baseline={tmp_path / 'baseline'}", *args, timeout=300)


def _workers(out: Path) -> dict[str, str]:
    """Which worker ran each test (what -> gw0/gw1), as the tests wrote it."""
    return dict(json.loads(p.read_text()) for p in out.glob("worker-*.json"))


def _labs_overlapped(out: Path) -> dict:
    labs = [json.loads((out / f"lab-{n}.json").read_text()) for n in (1, 2)]
    done = [float((out / f"lab-{n}.done").read_text()) for n in (1, 2)]
    assert max(lab["up"] for lab in labs) < min(done), (labs, done)  # both labs up at one time
    return labs


def _listed(result: pytest.RunResult, header: str) -> list[str]:
    """The node ids under one header of the p4netem baseline section (each header once)."""
    lines = result.stdout.lines
    starts = [i for i, line in enumerate(lines) if header in line]
    assert len(starts) == 1, result.stdout.str()
    out = []
    for line in lines[starts[0] + 1:]:
        if not line.startswith("  "):
            break
        out.append(line.strip())
    return out


@needs_root
def test_two_workers_run_labs_save_every_baseline_and_the_controller_lists_all(pytester, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    pytester.makepyfile(test_app=textwrap.dedent(APP.format(out=str(out))))
    monkeypatch.delenv("REGRESS", raising=False)
    monkeypatch.setenv("BREAK", "c")  # pytester's subprocess inherits the environment

    result = _session(pytester, tmp_path, "save", "--p4netem-save-baseline")
    result.assert_outcomes(passed=5, failed=1)
    workers = _workers(out)
    assert workers["lab-1"] != workers["lab-2"], workers  # one lab per worker, at one time
    labs = _labs_overlapped(out)
    assert labs[0]["grpc"] != labs[1]["grpc"] and labs[0]["tmp"] != labs[1]["tmp"], labs
    assert not set(labs[0]["names"]) & set(labs[1]["names"]), labs
    # Every passing test's baseline, from both workers, each in a file of its own.
    files = list((tmp_path / "baseline").glob("*.json"))
    saved = {json.loads(p.read_text())["test"] for p in files}
    assert len(files) == 5 and saved == {f"test_app.py::test_m[{what}]" for what in
                                         ("lab-1", "lab-2", "a/b", "a_b", "a b")}, files
    assert _listed(result, "test(s) not saved to") == ["test_app.py::test_m[c]"]

    # A test of each worker regresses (the two labs'), and test_m[a/b], which reads like two
    # others; the one not saved is new.
    monkeypatch.delenv("BREAK")
    monkeypatch.setenv("REGRESS", "lab-1,lab-2,a/b")
    for p in out.iterdir():
        p.unlink()
    result = _session(pytester, tmp_path, "compare")
    result.assert_outcomes(passed=6, errors=3)
    workers = _workers(out)
    assert workers["lab-1"] != workers["lab-2"], workers
    _labs_overlapped(out)
    assert _listed(result, "test(s) regressed against") == ["test_app.py::test_m[a/b]", "test_app.py::test_m[lab-1]",
                                                            "test_app.py::test_m[lab-2]"]
    assert _listed(result, "test(s) with no baseline in") == ["test_app.py::test_m[c]"]
    assert result.stdout.str().count("p4netem baseline ====") == 1, result.stdout.str()
