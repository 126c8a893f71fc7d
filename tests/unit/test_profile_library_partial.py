"""load_profile_library: a profile file or directory whose documents may be whole profiles only once
their caller completes them (`p4netem trace load` sets each traced direction's `trace`): such a
document is checked as completed and returned as read; every other problem is still the file's."""

from __future__ import annotations

import pytest

from p4netem.cli.trace_cmd import _exact_profile
from p4netem.profiles import ProfileError, load_profiles
from p4netem.profiles.link import TracePlacement
from p4netem.profiles.yaml_files import load_profile_library

LIBRARY = """profiles:
  - {name: mm-codel, both: {queue: 100, aqm: codel}}
  - {name: mm-droptail, downlink: {queue: 50}, uplink: {rate: 1Mbit, queue: 20}}
  - {name: plain, both: {rate: 5Mbit, delay: 20ms}}
"""


def with_traces(*directions: str):
    """trace load's completion (cli/trace_cmd.py): the traced directions get a trace, not a rate."""
    placed = {d: TracePlacement(opportunities=10, period=20) for d in directions}
    return lambda doc: _exact_profile(doc, placed)


def test_documents_whole_only_with_their_traces_come_back_as_read(tmp_path) -> None:
    path = tmp_path / "lib.yaml"
    path.write_text(LIBRARY)
    with pytest.raises(ProfileError, match="a queue limit needs a rate"):
        load_profiles(path)  # alone, as apply --profiles reads it
    profiles, partial = load_profile_library(path, with_traces("uplink", "downlink"))
    assert [p.name for p in profiles] == ["plain"]
    assert partial == {"mm-codel": {"name": "mm-codel", "both": {"queue": 100, "aqm": "codel"}},
                       "mm-droptail": {"name": "mm-droptail", "downlink": {"queue": 50},
                                       "uplink": {"rate": "1Mbit", "queue": 20}}}


def test_what_the_traces_do_not_complete_is_named_in_the_file(tmp_path) -> None:
    path = tmp_path / "lib.yaml"
    path.write_text(LIBRARY)
    with pytest.raises(ProfileError) as info:
        load_profile_library(path, with_traces("downlink"))  # mm-codel's uplink has no trace and no rate
    assert str(info.value) == (f"{path}: 2 problems\n"
                               "  profiles[0].uplink.queue: a queue limit needs a rate (without one the rate queue "
                               "is always empty)\n"
                               "  profiles[0].uplink.aqm: codel needs a rate or a trace (without one the rate queue "
                               "is always empty)")
    path.write_text(LIBRARY + "  - {name: bad, both: {delay: soon}}\n  - {name: plain, both: {delay: 1ms}}\n")
    with pytest.raises(ProfileError) as info:
        load_profile_library(path, with_traces("uplink", "downlink"))
    text = str(info.value)
    assert "profiles[3].both.delay" in text and "uplink.delay" not in text and "profiles[4].name: duplicate profile name 'plain'" in text, text


def test_a_directory_names_each_document_once(tmp_path) -> None:
    (tmp_path / "a.yaml").write_text("name: mm-codel\nboth: {queue: 100, aqm: codel}\n")
    (tmp_path / "b.yaml").write_text("name: mm-codel\nboth: {queue: 10}\n")
    with pytest.raises(ProfileError, match="b.yaml: duplicate profile name 'mm-codel' \\(also in a.yaml\\)"):
        load_profile_library(tmp_path, with_traces("uplink", "downlink"))
    (tmp_path / "b.yaml").write_text("name: plain\nboth: {rate: 1Mbit}\n")
    profiles, partial = load_profile_library(tmp_path, with_traces("uplink", "downlink"))
    assert [p.name for p in profiles] == ["plain"] and list(partial) == ["mm-codel"]
