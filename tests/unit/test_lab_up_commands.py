"""`p4netem lab up --cmd`: a line Mininet's CLI would answer with "*** Unknown command" (and then
exit 0) is an `error:` naming the --cmd and the word, exit 1, before any lab comes up (MininetLab is
replaced by one that fails the test if reached)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from p4netem.cli import app
from p4netem_studies.cli.lab_cmd import check_commands
from p4netem_studies.mininet.topology import load_topology

pytest.importorskip("mininet.cli")


@pytest.fixture
def no_lab(monkeypatch):
    from p4netem_studies.mininet import lab

    class Refused:
        def __init__(self, *_a, **_k):
            raise AssertionError("a lab would have come up")
    monkeypatch.setattr(lab, "MininetLab", Refused)


def invoke(*args: str):
    res = CliRunner().invoke(app, ["lab", "up", *args], env={"COLUMNS": "400"})
    assert "Traceback" not in res.output and not isinstance(res.exception, AssertionError), res.output
    return res


def test_an_unknown_host_is_an_error_before_the_lab(no_lab):
    res = invoke("inline", "--cmd", "client ping -c 1 server", "--cmd", "unknownhost ping -c 1 server")
    assert res.exit_code == 1
    assert res.output.startswith(
        "error: --cmd 'unknownhost ping -c 1 server': 'unknownhost' is not a host of lab 'inline' or a command of "
        "the lab CLI (Mininet would print \"*** Unknown command\" and go on); hosts: client, server (switch: s1)")
    assert "'client ping" not in res.output  # the good one is not named


def test_each_bad_command_gets_its_own_error_line(no_lab):
    res = invoke("multi-origin", "-p", "servers=2", "--cmd", "client", "--cmd", "time server3 ls",
                 "--cmd", "!ls", "--cmd", "server9 ping client")
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["error"] * 4, res.output
    assert lines[0] == "error: --cmd 'client': 'client' needs a command after it (HOST COMMAND)"
    assert "'server3' is not a host of lab 'multi-origin'" in lines[1]
    assert "'!ls' is not a host" in lines[2] and "'server9' is not a host" in lines[3]


@pytest.mark.parametrize("line", [
    "client ping -c 1 server", "server curl -s http://10.0.0.1/", "pingall", "py net.hosts", "sh ls",
    "help", "?", "profile hspa", "iw 10", "hosts", "s1 ip link", "time client true", "noecho client ls",
    "time", "", "   ", "# a comment", "client ls # with a comment",
])
def test_what_the_lab_cli_runs_is_accepted(line):
    assert check_commands([line], load_topology("inline").expand()) == []
