"""Every YAML input (profiles, rules, timelines, topologies, experiments) is read within bounded
time and memory, and its errors are bounded text (issue 13, defect 1: a 307-byte "billion laughs"
profile took 20 s, 2.2 GB and wrote 312 MB to stderr). Ordinary anchors and aliases still work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from p4netem import safe_yaml
from p4netem.control import RuleError, Timeline, TimelineError, load_rules
from p4netem.profiles import ProfileError, load_profiles, loads_profiles
from p4netem_studies.experiments.definition import ExperimentError, load_raw
from p4netem_studies.mininet.topology import TopologyError, load_topology

P4NETEM = Path(sys.executable).parent / "p4netem"


def laughs(levels: int, key: str = "name") -> str:
    """Nested aliases: 9**levels strings from a few hundred bytes, the last one under `key`."""
    lines = ['_a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnop"
    for prev, cur in zip(names, names[1:levels]):
        lines.append(f"_{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines.append(f"{key}: *{names[levels - 1]}")
    return "\n".join(lines) + "\n"


def test_apply_refuses_an_alias_bomb_quickly_with_one_short_error(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs(9))  # 9**9 = 387 million strings once expanded
    assert bomb.stat().st_size < 400
    # 1 GiB of address space and 60 s: before the bound, the expansion ran out of either.
    # prlimit, not a preexec_fn: see tests/child_signals.py on fork() beside gRPC's threads.
    r = subprocess.run(["prlimit", f"--as={1 << 30}", str(P4NETEM), "apply", "-p", str(bomb), "x",
                        "--switch", "127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr[-2000:]
    assert len(r.stderr) < 1000, f"{len(r.stderr)} bytes of stderr"
    assert "aliases expand to" in r.stderr and "at most 10000" in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["profile", "rules", "timeline", "topology", "experiment"])
def test_every_loader_refuses_an_alias_bomb(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.yaml"
    path.write_text(laughs(8, key={"profile": "name", "rules": "rules", "timeline": "steps",
                                   "topology": "hosts", "experiment": "pages"}[kind]))
    load, error = {
        "profile": (load_profiles, ProfileError),
        "rules": (lambda p: load_rules(Path(p).read_text(), str(p)), RuleError),
        "timeline": (Timeline.load, TimelineError),
        "topology": (load_topology, TopologyError),
        "experiment": (load_raw, ExperimentError),
    }[kind]
    with pytest.raises(error) as info:
        load(path)
    assert "aliases expand to" in str(info.value) and len(str(info.value)) < 500


@pytest.mark.parametrize("text, message", [
    ("a: &a [*a]\n", "recursive alias"),
    ("name: " + "[" * 50_000 + "\n", "nested too deeply"),
    ("name: " + "9" * 5000 + "\n", "a value cannot be read"),
])
def test_other_unbounded_inputs_are_one_error(text: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        loads_profiles(text, "x.yaml")
    assert message in str(info.value) and len(str(info.value)) < 500


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("w") as f:
        f.truncate(safe_yaml.MAX_BYTES + 1)
    with pytest.raises(ProfileError, match=f"at most {safe_yaml.MAX_BYTES} are read"):
        load_profiles(big)


def test_errors_are_bounded_text() -> None:
    # One huge value, and thousands of bad entries: both print a few lines of bounded length.
    with pytest.raises(ProfileError) as info:
        loads_profiles("name: x\nuplink: {delay: [" + ", ".join(["1"] * 5000) + "]}\n")
    assert len(str(info.value)) < 400 and "uplink.delay" in str(info.value)
    with pytest.raises(ProfileError) as info:
        loads_profiles("profiles:\n" + "".join(f"  - {{name: p{i}, uplink: {{loss: 150%}}}}\n" for i in range(3000)))
    text = str(info.value)
    assert text.startswith("<string>: 3000 problems") and "... and 2950 more" in text
    assert len(text.splitlines()) == 52 and max(map(len, text.splitlines())) <= 1000


def test_ordinary_anchors_and_aliases_still_work() -> None:
    (profile,) = loads_profiles("name: same-both-ways\nuplink: &link {delay: 20ms, rate: 5Mbit}\n"
                                "downlink: *link\n")
    assert profile.uplink == profile.downlink and int(profile.uplink.delay) == 20_000_000


@pytest.mark.parametrize("field, value", [
    ("delay", '"1e100000000ms"'), ("delay", "1e100000000"), ("rate", '"1e100000000mbit"'),
    ("loss", "1e100000000"), ("loss", '"1e100000000%"'), ("queue", '{bytes: "1e999999999KB"}'),
])
def test_a_huge_exponent_is_a_named_field_error_not_a_traceback(field: str, value: str) -> None:
    # Scaled by a unit or printed, 1e100000000 overflowed Decimal's context (decimal.Overflow).
    with pytest.raises(ProfileError) as info:
        loads_profiles(f"name: huge\nboth:\n  {field}: {value}\n", "x.yaml")
    assert f"both.{field}" in str(info.value) and len(str(info.value)) < 500
