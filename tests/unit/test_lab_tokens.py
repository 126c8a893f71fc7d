"""Lab tokens (p4netem.lab.netns.unique_token, p4netem.lab.tokens): unique among live processes,
none the beginning of another, and short enough for every interface name built from one."""

from __future__ import annotations

import itertools

import pytest

from p4netem.lab import netns, tokens
from p4netem.lab.netns import PREFIX, LabError, unique_token
from p4netem.lab.owner import LabRecord, Owner


def _token(monkeypatch, pid: int, n: int) -> str:
    """The token process `pid` gives its lab number `n`."""
    monkeypatch.setattr(netns.os, "getpid", lambda: pid)
    monkeypatch.setattr(netns, "_counter", itertools.count(n))
    return unique_token()


def test_tokens_of_two_processes_neither_equal_nor_one_the_beginning_of_another(tmp_path, monkeypatch):
    """A base-36 pid then a counter, each as wide as it needed: pid 100's 37th lab (`2s` `10`) and
    pid 3601's first (`2s1` `0`) both had token `2s10`, and pid 100's second lab (`2s1`) began it,
    so a sweep of names beginning with `p4n2s1` removed two other labs' namespaces."""
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path))
    second, thirty_seventh = _token(monkeypatch, 100, 1), _token(monkeypatch, 100, 36)
    other = _token(monkeypatch, 3601, 0)
    made = [second, thirty_seventh, other]
    assert len(set(made)) == 3, made
    for a, b in itertools.permutations(made, 2):
        assert not b.startswith(a), (a, b)
        # A name made from one token (a host's namespace) begins with no other token.
        assert not f"{PREFIX}{b}client".startswith(f"{PREFIX}{a}"), (a, b)


def test_every_name_of_the_longest_token_fits_an_interface_name(tmp_path, monkeypatch):
    """The highest pid Linux allows (pid_max up to 4194304) with the last lab number: a Mininet
    lab's switch-side interface of port 509 and a TwoHostLab's are within Linux's 15 characters."""
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path))
    longest = _token(monkeypatch, tokens.PID_MAX_LIMIT, tokens.COUNTER_LIMIT - 1)
    assert len(_token(monkeypatch, 1, 0)) == len(longest) == tokens.LENGTH
    assert len(f"{PREFIX}{longest}p509") <= 15 and len(f"{PREFIX}{longest}s2") <= 15
    with pytest.raises(LabError, match="46656 lab tokens"):
        _token(monkeypatch, 100, tokens.COUNTER_LIMIT)     # never a wider, prefix-making token


def test_a_token_whose_dead_lab_is_still_recorded_is_not_given_again(tmp_path, monkeypatch):
    """A pid is unique among live processes only: a process killed outright with its lab's record
    still there had our pid, and a cleaner will remove the names of that token."""
    monkeypatch.setenv("P4NETEM_RUN_DIR", str(tmp_path))
    taken = tokens.make(100, 0)
    LabRecord(f"{PREFIX}{taken}", Owner(100, 1, "boot"), "test", path=tmp_path / f"{PREFIX}{taken}.json").save()
    claimed = tokens.make(100, 1)       # a cleaner is removing it (owner.py renames it so)
    (tmp_path / f".{PREFIX}{claimed}.json.cleaning-7").write_text("{}")
    assert _token(monkeypatch, 100, 0) == tokens.make(100, 2)


@pytest.mark.parametrize("text, ok", [("0002s001", True), ("2s10", False), ("0002s0010", False),
                                      ("0002S001", False), ("2hwch000", False), ("00000000", False),
                                      ("0002s00-", False)])
def test_what_counts_as_a_token(text, ok):
    """Only a token as unique_token writes them: a cleaner sweeps names beginning with a record's
    prefix only then (pid 0, and 4194305, `2hwch`, above any pid, are none)."""
    assert tokens.is_token(text) is ok
