"""Input handling of the study commands (`lab`, `measure`, `experiment`): every mistake a user can
make on the command line or in a topology file is a one-line error with the option or field
named and the documented exit code, before any lab comes up; nothing here builds a namespace
(the commands' lab-building functions are replaced by ones that fail the test if reached)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from p4netem.cli import app
from p4netem_studies.mininet.topology import TopologyError, load_topology

TWO_HOSTS = """name: t
params: {{n: {n}}}
hosts:
  - {{name: client, role: client, ip: 10.0.0.1, count: {count}}}
  - {{name: server, role: server, ip: 10.0.1.1}}
"""


@pytest.fixture
def no_labs(monkeypatch):
    """Fail the test if a command gets as far as running loads."""
    from p4netem_studies.experiments import run as exp_run
    from p4netem_studies.harness import measure

    def refuse(*_a, **_k):
        raise AssertionError("a lab would have come up")
    monkeypatch.setattr(measure, "run_plan", refuse)
    monkeypatch.setattr(exp_run, "run_experiment", refuse)


def _invoke(args):
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert "Traceback" not in res.output and not isinstance(res.exception, AssertionError), res.output
    return res


@pytest.mark.parametrize("n", ["0", "-3", "true"])
def test_topology_parameter_defaults_are_range_checked(tmp_path, n):
    # A default of 0 (or less) expanded to a lab without clients (lab up ran one) or without
    # servers (measure died on an IndexError); `-p n=0` was already refused.
    path = tmp_path / "t.yaml"
    path.write_text(TWO_HOSTS.format(n=n, count='"{n}"'))
    with pytest.raises(TopologyError, match=r"params: .*n: "):
        load_topology(path)
    res = _invoke(["lab", "show", str(path)])
    assert res.exit_code == 1 and "invalid topology" in res.output


def test_topology_count_true_is_not_one(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TWO_HOSTS.format(n=1, count="true"))
    with pytest.raises(TopologyError, match=r"hosts\.0\.count"):
        load_topology(path)


@pytest.mark.parametrize("page", ["uniform-5", "uniform-axb", "uniform-5x-1", "e5-site", "e3-a-xs"])
def test_malformed_page_names_name_the_forms(page):
    from p4netem_studies.web.pages import named
    with pytest.raises(ValueError, match=r"unknown page .*uniform-NxS"):
        named(page)


def test_numbered_page_names_still_parse():
    from p4netem_studies.web.pages import NAMES, named
    for name in NAMES + ["uniform-8x1000", "e3-b", "e3-c-4", "E3-A-2s"]:
        named(name)


@pytest.mark.parametrize("extra, message", [
    (["--reps", "0"], "--reps"),                     # was run as the default 5
    (["--silence", "0"], "--silence"),
    (["--timeout", "-1"], "--timeout"),
    (["--conns-per-host", "0"], "--conns-per-host"),
    (["--client-rmem", "abc"], "--client-rmem"),     # was a sysctl failure once the lab was up
    (["--target", "nope"], "--target"),
    (["--page", "uniform-5"], "unknown page"),
])
def test_measure_refuses_bad_options_before_a_lab(no_labs, tmp_path, extra, message):
    res = _invoke(["measure", "--profile", "lan", "--protocol", "h2", "--out", str(tmp_path / "o"),
                   *extra])
    assert res.exit_code == 2 and message in res.output
    assert not (tmp_path / "o").exists()


def test_measure_out_that_cannot_be_a_directory(no_labs, tmp_path):
    (tmp_path / "file").write_text("x")
    res = _invoke(["measure", "--profile", "lan", "--protocol", "h2", "--out",
                   str(tmp_path / "file" / "sub")])
    assert res.exit_code == 2 and "--out" in res.output and "cannot create" in res.output


@pytest.mark.parametrize("extra, message", [
    (["--reps", "0"], "--reps"),                     # was the definition's repetitions
    (["--sample", "0"], "--sample"),                 # was a sample of 1 cell
    (["--target", "nope"], "--target"),
])
def test_experiment_run_refuses_bad_options_before_a_lab(no_labs, tmp_path, extra, message):
    res = _invoke(["experiment", "run", "e5", "--quick", "--out", str(tmp_path / "o"), *extra])
    assert res.exit_code == 2 and message in res.output


def test_experiment_run_out_that_cannot_be_a_directory(no_labs, tmp_path):
    (tmp_path / "file").write_text("x")
    res = _invoke(["experiment", "run", "e5", "--quick", "--out", str(tmp_path / "file" / "x")])
    assert res.exit_code == 2 and "cannot create" in res.output


@pytest.mark.parametrize("content", [b"garbage\n", b""])
def test_damaged_run_store_is_a_one_line_error(tmp_path, content):
    (tmp_path / "run.db").write_bytes(content)
    for cmd, code in (("status", 2), ("analyze", 1), ("recheck", 2)):
        res = _invoke(["experiment", cmd, str(tmp_path)])
        assert res.exit_code == code and "run store is damaged" in res.output, (cmd, res.output)


def test_run_plan_removes_a_stale_plot_when_it_draws_none(monkeypatch, tmp_path):
    """A measure whose loads all failed drew no plot, and one of an earlier run into the same
    --out stayed beside the new CSVs."""
    from p4netem_studies.harness import measure
    from p4netem_studies.harness.plan import Plan, matrix

    class FakeRunner:
        def __init__(self, *_a, **_k):
            self.records = [object()]

        def run(self):
            pass

        def finish_metadata(self):
            return {}

    monkeypatch.setattr(measure, "Runner", FakeRunner)
    monkeypatch.setattr(measure.results, "summarize", lambda plan, records: [])
    monkeypatch.setattr(measure.results, "write", lambda *a, **k: {})
    plan = Plan("t", matrix(["lan"], ["h2"], [10]), repetitions=1)
    (tmp_path / "plot.png").write_bytes(b"old")
    measure.run_plan(plan, tmp_path, make_plot=False)
    assert (tmp_path / "plot.png").exists()            # an experiment draws its own: untouched
    outcome = measure.run_plan(plan, tmp_path)
    assert not (tmp_path / "plot.png").exists() and "plot" not in outcome.paths


def test_target_names_are_the_labs_targets():
    from p4netem_studies.cli.run_options import TARGET_NAMES
    from p4netem_studies.mininet.lab import TARGETS
    assert set(TARGET_NAMES) == set(TARGETS)


def test_address_clash_names_the_hosts_not_every_address():
    # cellular with 1023 UEs runs its clients into the server's 10.0.1.1: the error listed all
    # 1024 addresses of the lab and named no host.
    with pytest.raises(TopologyError) as exc:
        load_topology("cellular").expand({"ues": 1023})
    msg = str(exc.value)
    assert "addresses repeat: ue257 and server on 10.0.1.1" in msg and len(msg) < 300


@pytest.mark.parametrize("pair", ["pairs=\u0663", "pairs=", "=3", "pairs=3x", "pairs"])
def test_a_topology_parameter_is_ascii_digits(pair):
    import typer

    from p4netem_studies.cli.lab_cmd import parse_params

    with pytest.raises(typer.BadParameter, match="NAME=NUMBER"):
        parse_params([pair])
    assert parse_params(["pairs=3"]) == {"pairs": 3}
