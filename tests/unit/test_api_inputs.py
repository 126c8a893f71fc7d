"""Input a script gives the controller API, checked without a switch: one rule given alone (not in
a list), profiles built in code with pydantic's model_copy (which validates nothing), and ids out
of P4Runtime's range refused before any connection is opened."""

from __future__ import annotations

import threading

import pytest

from p4netem.control import Controller, Profile, ProfileError, Rule, RuleError
from p4netem.control.catalog import ProfileCatalog
from p4netem.control.switching import DEFAULT_RULE, ProfileSwitching
from p4netem.p4rt import P4RuntimeClient
from p4netem.profiles import LinkParams


class _Session:
    """What ProfileSwitching.validate needs of a session: the switch's UE ids."""
    ue_ids = 1 << 20


def _switching() -> ProfileSwitching:
    return ProfileSwitching(_Session(), ProfileCatalog(), None)


def test_one_rule_may_be_given_alone():
    switching = _switching()
    rule = Rule.parse({"client": "10.0.0.9", "ue": 3})
    # Before: a Rule alone raised TypeError (no len()); a string was read character by character.
    assert switching.parse_rules(rule) == [rule]
    assert switching.parse_rules("client=10.0.0.9,ue=3") == [rule]
    assert switching.parse_rules({"client": "10.0.0.9", "ue": 3}) == [rule]
    assert switching.parse_rules(None) == [DEFAULT_RULE] and switching.parse_rules([]) == [DEFAULT_RULE]
    with pytest.raises(RuleError, match=r"client\.ip: \"10\.0\.0\.300\" is not an IP address"):
        switching.parse_rules("client=10.0.0.300")


BASE = Profile.parse({"name": "base", "both": {"delay": "10ms", "rate": "5Mbit"}})


@pytest.mark.parametrize(("derived", "message"), [
    # A dict where a LinkParams belongs: AttributeError in profiles/table.py before.
    (BASE.model_copy(update={"downlink": {"delay": "-5ms"}}),
     r"downlink\.delay: \"-5ms\" is not a duration \(negative\); allowed 0s\.\."),
    # A loss out of range: decimal.InvalidOperation before.
    (BASE.model_copy(update={"uplink": BASE.uplink.model_copy(update={"loss": "150%"})}),
     r"uplink\.loss: 150% out of range 0\.\.100%"),
    (BASE.model_copy(update={"name": "Bad Name"}), r"name: \"Bad Name\" is not a profile id"),
])
def test_a_profile_built_with_model_copy_is_checked_like_a_parsed_one(derived, message):
    with pytest.raises(ProfileError, match=message):
        _switching().validate([(DEFAULT_RULE, derived)])
    with pytest.raises(ProfileError, match=message):
        ProfileCatalog([derived])


def test_a_model_copy_with_valid_values_applies_as_parsed():
    # "50ms" (a str where a Duration belongs): ValueError int('50ms') in table.py before.
    derived = BASE.model_copy(update={"downlink": BASE.downlink.model_copy(update={"delay": "50ms"})})
    pairs, encoded, _ = _switching().validate([(DEFAULT_RULE, derived)])
    uplink, downlink, _radio = encoded[0]
    assert pairs[0][1].downlink.delay == 50_000_000
    assert (uplink["delay_ns"], downlink["delay_ns"]) == (10_000_000, 50_000_000)
    assert BASE.checked() is BASE  # a valid profile is used as it is
    assert Profile.parse({"name": "x"}).model_copy(update={"uplink": LinkParams(delay="1ms")}).checked().uplink.delay \
        == 1_000_000


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"election_id": -1}, r"election id -1 out of range 0\.\.340282366920938463463374607431768211455"),
    ({"election_id": 2**128}, r"election id \d+ out of range"),
    ({"device_id": -1}, r"device id -1 out of range 0\.\.18446744073709551615"),
    ({"max_atomicity": "ATOMIC"}, r"max_atomicity must be one of DATAPLANE_ATOMIC"),
])
def test_ids_out_of_range_fail_before_a_connection_is_opened(kwargs, message):
    before = {t.ident for t in threading.enumerate()}
    # Nothing listens on port 1: the check must come before any attempt to connect (which would
    # take the whole timeout and fail with UNAVAILABLE instead).
    with pytest.raises(ValueError, match=message):
        Controller.connect("127.0.0.1:1", timeout=30, **kwargs)
    assert {t.ident for t in threading.enumerate()} <= before


def test_a_bad_election_id_leaves_the_client_as_it_was():
    client = P4RuntimeClient("127.0.0.1:1", election_id=5)
    with pytest.raises(ValueError, match="election id -3 out of range"):
        client.arbitrate(election_id=-3)
    with pytest.raises(ValueError, match="election id -3 out of range"):
        client.reconnect(election_id=-3)
    assert client.election_id == 5  # before: -3, and every later request failed with ValueError


def test_an_explicit_p4info_that_does_not_exist_is_an_error():
    # Before: silently ignored, so nothing was verified.
    with pytest.raises(FileNotFoundError, match="nonexistent.txtpb"):
        Controller.connect("127.0.0.1:1", timeout=30, p4info="/nonexistent.txtpb")


def test_apply_result_to_dict_is_what_apply_json_prints(capsys):
    import json

    from p4netem.cli.apply_cmd import print_result
    from p4netem.control import AppliedRule, ApplyResult

    rule = AppliedRule(number=1, rule=DEFAULT_RULE.model_copy(update={"priority": 5}), profile=BASE,
                       profile_name="base", modified=(), profile_id=1, spare_id=2)
    result = ApplyResult(rules=[rule], added=1, warnings=["w"], flip_sent_ns=1_000_000, flip_done_ns=1_250_000)
    print_result(result, True)
    assert json.loads(capsys.readouterr().out) == result.to_dict()
    assert result.to_dict()["flip_ms"] == 0.25 and result.to_dict()["rules"][0]["profile"] == "base"


@pytest.mark.parametrize(("call", "message"), [
    # Before: limit=-1 silently left out the last UE (wanted[:-1]); a UE id as a string raised
    # TypeError from a comparison.
    (lambda rb: rb.radio(limit=-1), r"limit: -1 out of range 0\.\.2147483647 \(0: no limit\)"),
    (lambda rb: rb.radio(scan=-4), r"scan: -4 out of range 0\.\.2147483647"),
    (lambda rb: rb.radio(ues=[1, 2**21]), r"ue: UE ids \[2097152\] outside the switch's 0\.\.1048575"),
    (lambda rb: rb.idle_radio(["3"]), r"ue: UE ids \['3'\] outside the switch's 0\.\.1048575"),
    (lambda rb: rb.stats(radio_limit=-1), r"radio_limit: -1 out of range 0\.\.2147483647"),
])
def test_radio_and_stats_arguments_are_checked_first(call, message):
    from p4netem.control.readback import Readback

    with pytest.raises(RuleError, match=message):
        call(Readback(_Session(), ProfileCatalog()))


@pytest.mark.parametrize(("mapping", "message"), [
    ({1: "x"}, r"port_map\[1\]: 'x' is not a switch port; allowed 0\.\.511"),  # ValueError from int() before
    ({1: 2.5}, r"port_map\[1\]: 2\.5 is not a switch port"),  # passed the range check before
    ({600: 1}, r"port_map: 600 is not a switch port; allowed 0\.\.511"),
])
def test_a_bad_port_map_names_the_port_and_the_range(mapping, message):
    from p4netem.control.forwarding import Forwarding

    with pytest.raises(RuleError, match=message):
        Forwarding(_Session()).set_port_map(mapping)


def test_apply_many_names_an_assignment_that_is_not_a_pair():
    # Before: ValueError "not enough values to unpack" from inside validate().
    with pytest.raises(RuleError, match=r"rules\[1\]: \('client=10\.0\.0\.2',\) is not a \(rule, profile\) pair"):
        _switching().validate([("client=10.0.0.1", "lan"), ("client=10.0.0.2",)])
    with pytest.raises(RuleError, match=r"rules\[0\]: 'client=10\.0\.0\.1' is not a \(rule, profile\) pair"):
        _switching().validate(["client=10.0.0.1"])
