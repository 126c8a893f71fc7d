"""Timelines without a switch: YAML forms, the compiled schedule, `set` on profiles, and every
problem named with its step and field before anything runs."""

from __future__ import annotations

import functools

import pytest

from p4netem.control import OUTAGE, Timeline, TimelineError, modify_profile
from p4netem.control.controller import resolve_profile
from p4netem.profiles import ProfileError, builtin_profile, builtin_profiles
from p4netem.profiles.units import Duration, Percent, Rate

MS = 1_000_000
S = 1_000_000_000


def compile_text(text: str, base=None, **extra):
    timeline = Timeline.loads(text, "t.yaml")
    known = dict(builtin_profiles())
    known.update({p.name: p for p in timeline.profiles})
    return timeline, timeline.compile(functools.partial(resolve_profile, known=known), base)


def test_schedule_of_a_handover():
    timeline, events = compile_text("""
name: handover
profiles:
  - {name: weak-cell, both: {delay: 80ms, loss: 2%}}
steps:
  - apply: lte
  - at: 10s
    set: {downlink.rate: 2Mbit, delay: 40ms}
  - at: 20s
    outage: 3s
  - wait: 2s
  - apply: weak-cell
  - wait: 5s
  - restore
  - outage: open
  - at: 40s
    restore:
""")
    got = [(e.at_ns, e.action, e.profile.name) for e in events]
    assert got == [
        (0, "apply lte", "lte"),
        (10 * S, "set downlink.rate=2Mbit, delay=40ms", "lte"),
        (20 * S, "outage 3s", "outage"),
        (23 * S, "end of outage, back to lte", "lte"),
        (25 * S, "apply weak-cell", "weak-cell"),
        (30 * S, "restore weak-cell; outage open", "outage"),  # same instant: one change
        (40 * S, "end of outage, back to weak-cell", "weak-cell"),
    ]
    changed = events[1].profile
    assert changed.downlink.rate == Rate.parse("2Mbit") and changed.uplink.rate == builtin_profile("lte").uplink.rate
    assert changed.downlink.delay == changed.uplink.delay == Duration.parse("40ms")
    # The outage ends with the changed profile, not the original one.
    assert events[3].profile == changed
    assert events[2].profile == OUTAGE and OUTAGE.uplink.loss == Percent(100)
    assert timeline.duration_ns() == 40 * S


def test_restore_undoes_set_steps():
    _, events = compile_text("""
steps:
  - apply: hspa
  - set: {uplink.loss: 1%}     # at the same instant as the apply: one change
  - at: 1s
    restore: true
""")
    assert [e.at_ns for e in events] == [0, S]
    assert events[0].profile.uplink.loss == Percent(1) and events[0].action == "apply hspa; set uplink.loss=1%"
    assert events[-1].profile == builtin_profile("hspa")


def test_timeline_can_start_from_the_switch_profile():
    timeline, events = compile_text("steps:\n  - set: {delay: 5ms}\n", base=builtin_profile("lan"))
    assert timeline.needs_base
    assert events[0].profile.downlink.delay == 5 * MS and events[0].profile.downlink.rate == Rate.parse("1Gbit")
    with pytest.raises(TimelineError, match="no profile in force to change; apply one first"):
        compile_text("steps:\n  - set: {delay: 5ms}\n")


def test_every_problem_is_named_with_step_and_field():
    with pytest.raises(TimelineError) as info:
        compile_text("""
steps:
  - apply: nosuch
  - at: 5s
    set: {downlink.rate: -2Mbit, dealy: 4ms, loss: 200%}
  - at: 2s
    wait: 1s
  - outage: 0s
  - {apply: lte, wait: 1s}
  - foo
""")
    text = str(info.value)
    assert text.startswith("t.yaml: ")
    for needle in ("steps[3].outage: 0s out of range (0s..24h], or open",
                   "steps[4]: 2 actions (apply, wait); a step has exactly one of",
                   'steps[5]: "foo" is not a step'):
        assert needle in text, text
    # Structure first; once the structure is valid, the schedule's problems all at once.
    with pytest.raises(TimelineError) as info:
        compile_text("""
steps:
  - apply: nosuch
  - at: 5s
    set: {downlink.rate: -2Mbit, dealy: 4ms, loss: 200%}
  - at: 2s
    wait: 1s
""", base=builtin_profile("lan"))
    msgs = [str(p) for p in info.value.problems]
    assert msgs[0].startswith("steps[0].apply: no built-in or known profile 'nosuch'")
    assert "steps[1].set.loss: 200% out of range 0..100%" in msgs
    assert "steps[1].set.dealy: unknown field; did you mean 'delay'?" in msgs
    assert any(m.startswith('steps[1].set.downlink.rate: "-2Mbit" is not a rate') for m in msgs)
    assert "steps[2].at: 2s is before the end of the previous step (5s)" in msgs


def test_bad_yaml_and_shapes():
    with pytest.raises(TimelineError, match="not valid YAML"):
        Timeline.loads("steps: [apply: lte", "x.yaml")
    with pytest.raises(TimelineError, match="steps: must be a non-empty list of steps"):
        Timeline.loads("steps: []")
    with pytest.raises(TimelineError, match="rules\\[0\\].dscp: 64 out of range"):
        Timeline.loads("rules: [{client: 10.0.0.1, dscp: 64}]\nsteps: [{apply: lte}]")
    with pytest.raises(TimelineError, match="profiles\\[0\\].uplink.loss: 150% out of range"):
        Timeline.loads("profiles: [{name: x, uplink: {loss: 150%}}]\nsteps: [{apply: x}]")
    assert Timeline.loads("- apply: lte\n- wait: 1s\n").duration_ns() == S  # a bare list of steps


def test_modify_profile_paths():
    hspa = builtin_profile("hspa")
    changed = modify_profile(hspa, {"both.loss": "1%", "downlink.queue.packets": 30, "uplink.jitter": None})
    assert changed.uplink.loss == changed.downlink.loss == Percent(1)
    assert changed.downlink.queue.packets == 30 and changed.uplink.jitter == 0
    assert changed.radio == hspa.radio and changed.name == "hspa"
    with pytest.raises(ProfileError) as info:
        modify_profile(hspa, {"name": "x", "downlink.rate.x": 1, "rate": "unlimited"})
    msgs = [str(p) for p in info.value.problems]
    assert msgs[0] == "name: cannot be changed by a timeline"
    assert any(m.startswith("downlink.rate.x: downlink.rate is not a block") for m in msgs), msgs


def test_set_steps_change_the_link_in_place_and_applies_switch():
    """`set` and `restore` (of the profile in force) are in-place changes of the same link;
    `apply` and outages switch to the spare id; `set_mode: switch` makes `set` switch too."""
    text = """
{mode}
steps:
  - apply: lte
  - {{at: 1s, set: {{downlink.rate: 2Mbit}}}}
  - {{at: 2s, restore: true}}
  - {{at: 3s, outage: 1s}}
  - {{at: 5s, apply: hspa}}
  - {{set: {{delay: 10ms}}}}      # same instant as the apply: one change, which must switch
"""
    _, events = compile_text(text.format(mode=""))
    assert [(e.action, e.in_place) for e in events] == [
        ("apply lte", False), ("set downlink.rate=2Mbit", True), ("restore lte", True),
        ("outage 1s", False), ("end of outage, back to lte", False),
        ("apply hspa; set delay=10ms", False)]
    timeline, events = compile_text(text.format(mode="set_mode: switch"))
    assert timeline.set_mode == "switch" and not any(e.in_place for e in events)
    with pytest.raises(TimelineError, match=r"set_mode: \"sideways\" is not a set mode; allowed in-place, switch"):
        compile_text(text.format(mode="set_mode: sideways"))


def test_own_profiles_are_the_inline_ones_and_the_applied_files(tmp_path):
    """What `--profiles TIMELINE` makes known: the inline profiles, then the profile files the
    `apply` steps name (relative to the timeline), each once; built-in names are not looked up."""
    (tmp_path / "slow-wan.yaml").write_text("name: slow-wan\nboth: {delay: 40ms, rate: 5Mbit}\n")
    path = tmp_path / "handover.yaml"
    path.write_text("""
name: handover
profiles:
  - {name: weak-cell, both: {delay: 80ms, loss: 2%}}
steps:
  - apply: lte
  - {at: 1s, apply: weak-cell}
  - {at: 2s, apply: slow-wan.yaml}
  - {at: 3s, apply: slow-wan.yaml}
""")
    profiles = Timeline.load(path).own_profiles()
    assert [p.name for p in profiles] == ["weak-cell", "slow-wan"]
    assert str(profiles[1].downlink.rate) == "5Mbit"
    assert Timeline.loads("steps: [{apply: lte}]").own_profiles() == []
    # A file that cannot be loaded is named with its step (and the timeline).
    (tmp_path / "slow-wan.yaml").write_text("name: slow-wan\nboth: {loss: 150%}\n")
    with pytest.raises(TimelineError, match=r"handover.yaml.*steps\[2\].apply: slow-wan.yaml: both.loss: 150% out of range"):
        Timeline.load(path).own_profiles()
    (tmp_path / "slow-wan.yaml").unlink()
    with pytest.raises(TimelineError, match=r"steps\[2\].apply: slow-wan.yaml: cannot read"):
        Timeline.load(path).own_profiles()


def test_set_of_another_radio_model_starts_from_its_defaults():
    """`set: {radio.model: umts}` on an lte profile kept every lte field (tail, drx_*...) and was
    refused with nine problems about fields the step never named; `radio: MODEL` (as a profile
    file writes it) was "not a profile field path". The model's change comes first, whatever the
    order of the step's fields, and the other radio fields of the step apply on top."""
    lte = builtin_profile("lte")
    umts = modify_profile(lte, {"radio.promotion_idle_dch": "1s", "radio.model": "umts"})
    assert umts.radio.model == "umts" and umts.radio.promotion_idle_dch == Duration(S)
    assert umts.radio.inactivity_dch_fach == Duration(4 * S)  # umts's default, not lte's leftovers
    assert umts.downlink == lte.downlink and umts.uplink == lte.uplink
    assert modify_profile(lte, {"radio.fach_rate": "3kbit", "radio": "umts"}).radio.fach_rate == Rate(3000)
    assert modify_profile(lte, {"radio": None}).radio.model == "none"
    assert modify_profile(lte, {"radio.model": "none"}).radio.model == "none"
    # The same model keeps the profile's own values (lte's 100 ms promotion, not the 260 ms default).
    assert modify_profile(lte, {"radio.model": "lte", "radio.tail": "3s"}).radio.promotion == Duration(100 * MS)
    # A field the new model does not have is still named, alone.
    with pytest.raises(ProfileError) as info:
        modify_profile(lte, {"radio.model": "umts", "radio.tail": "1s"})
    assert [p.path for p in info.value.problems] == ["radio.tail"], info.value.problems
    with pytest.raises(ProfileError, match="radio.model: \"bogus\" is not a radio model; allowed none, umts"):
        modify_profile(lte, {"radio": "bogus"})
    _, events = compile_text("steps:\n  - apply: lte\n  - {at: 1s, set: {radio.model: gprs, delay: null}}\n")
    assert events[1].profile.radio.model == "gprs" and events[1].action == "set radio.model=gprs, delay=null"


def test_a_profile_file_that_cannot_be_applied_is_named(tmp_path):
    """`apply: missing.yaml` said only `steps[0].apply: cannot read: No such file or directory`,
    which of several files the timeline names left to guess; the file is named now (as
    own_profiles names it)."""
    (tmp_path / "bad.yaml").write_text("name: bad\nboth: {delay: 5}\n")
    path = tmp_path / "t.yaml"
    path.write_text("steps:\n  - apply: lan\n  - {at: 1s, apply: missing.yaml}\n  - {at: 2s, apply: bad.yaml}\n")
    timeline = Timeline.load(path)
    with pytest.raises(TimelineError) as info:
        timeline.compile(functools.partial(resolve_profile, known=dict(builtin_profiles())))
    msgs = [str(p) for p in info.value.problems]
    assert msgs[0] == "steps[1].apply: missing.yaml: cannot read: No such file or directory", msgs
    assert msgs[1].startswith('steps[2].apply: bad.yaml: both.delay: 5 has no unit'), msgs


def test_a_radio_field_on_a_profile_without_radio_is_named_not_dropped():
    # It was dropped in silence: the timeline's `set` step (and ctl.set) changed nothing.
    lan = builtin_profile("lan")
    assert not lan.has_radio
    with pytest.raises(ProfileError, match=r"radio\.promotion: 'lan' has no radio \(radio model none\)"):
        modify_profile(lan, {"radio.promotion": "1s"})
    # With the model given, the field applies on top of that model's defaults.
    assert modify_profile(lan, {"radio.model": "umts", "radio.promotion_idle_dch": "1s"}).has_radio
