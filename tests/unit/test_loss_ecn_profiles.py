"""netem's `ecn` as a profile field: `loss_ecn` (mark ECN-capable packets CE instead of losing them,
for whichever loss model is set). The contract's param, the table encoding both ways, the field-named
refusal without a loss model (tc's "ecn requested without loss model"), YAML, a non-bool value, and
the one-line summary. The netem spelling is in tests/unit/test_netem.py."""

from __future__ import annotations

import pytest

from p4netem.profiles import IMPAIRMENT_PARAMS, LinkParams, Profile, ProfileError, decode_link, dumps, encode_link
from p4netem.profiles import loads_profiles
from p4netem.profiles.summary import link_summary

NO_MODEL = ("true has no effect without a loss model: set loss, gilbert_elliott or loss_state (it marks what the "
            'model would lose; tc refuses netem\'s ecn without one too: "ecn requested without loss model")')
GE = {"p": "1%", "r": "20%"}
STATE = {"p13": "1%", "p31": "30%", "p32": "10%", "p23": "50%", "p14": "0.1%"}
# One direction per loss model, each with loss_ecn.
MODELS = {"random": {"loss": "5%"}, "correlated": {"loss": "5%", "correlation": {"loss": "25%"}},
          "gilbert_elliott": {"gilbert_elliott": GE}, "loss_state": {"loss_state": STATE}}


def _down(**link) -> Profile:
    return Profile.parse({"name": "ecn", "downlink": link})


def _problems(doc: dict) -> list[str]:
    with pytest.raises(ProfileError) as info:
        Profile.parse({"name": "ecn", **doc})
    return [str(p) for p in info.value.problems]


def test_the_param_is_the_contracts_one_bit_before_the_cells() -> None:
    # netem's cells (tests/unit/test_cell_profiles.py) and the on/off link came after it.
    assert IMPAIRMENT_PARAMS[52] == (53, "loss_ecn", 1)


@pytest.mark.parametrize("model", MODELS)
def test_each_loss_model_encodes_the_flag_and_reads_it_back(model: str) -> None:
    link = _down(**MODELS[model], loss_ecn=True).downlink
    assert link.loss_ecn is True
    params = link.to_table_params()
    assert params["loss_ecn"] == 1 and params["ecn"] == 0  # netem's ecn, not the AQM's
    assert list(params) == [name for _, name, _ in IMPAIRMENT_PARAMS]  # param-id order
    assert decode_link(params) == link and encode_link(decode_link(params)) == params
    # The same direction without it differs in that param only.
    plain = _down(**MODELS[model]).downlink.to_table_params()
    assert plain["loss_ecn"] == 0 and {k for k in params if params[k] != plain[k]} == {"loss_ecn"}
    assert decode_link(plain).loss_ecn is False


def test_the_default_is_off_and_a_switch_may_hold_it_alone() -> None:
    assert LinkParams().loss_ecn is False and LinkParams().to_table_params()["loss_ecn"] == 0
    # Read back from a switch (lenient): a client may have written loss_ecn without a loss model; it is
    # shown as it is, and the ineffective setting is still named.
    params = {**LinkParams().to_table_params(), "loss_ecn": 1}
    back = decode_link(params)
    assert back.loss_ecn is True and back.loss == 0 and encode_link(back) == params
    assert [str(p) for p in back.ineffective_settings()] == [f"loss_ecn: {NO_MODEL}"]
    # Out of its one bit: named by param.
    with pytest.raises(ProfileError) as info:
        decode_link({**params, "loss_ecn": 2})
    assert [str(p) for p in info.value.problems] == ["loss_ecn: 2 out of range 0..1 (bit<1>)"]


def test_without_a_loss_model_it_is_refused_at_its_field() -> None:
    assert _problems({"downlink": {"loss_ecn": True}}) == [f"downlink.loss_ecn: {NO_MODEL}"]
    assert _problems({"downlink": {"delay": "10ms", "loss": "0%", "loss_ecn": True}}) == [
        f"downlink.loss_ecn: {NO_MODEL}"]
    # A correlation without loss is named too, each at its own field; under `both`, as both.
    assert _problems({"both": {"loss_ecn": True, "correlation": {"loss": "25%"}}}) == [
        f"both.loss_ecn: {NO_MODEL}", "both.correlation.loss: 25% has no effect without loss"]
    # Only where it is set: the other direction is fine without a loss model.
    assert _problems({"uplink": {"loss": "1%", "loss_ecn": True}, "downlink": {"loss_ecn": True}}) == [
        f"downlink.loss_ecn: {NO_MODEL}"]
    # Any set loss model is one, as for tc: a gilbert_elliott whose states never lose is still a model
    # (its own no-op); false is never a problem.
    assert _down(gilbert_elliott={**GE, "loss_bad": "0%"}, loss_ecn=True).downlink.loss_ecn
    assert _down(loss_ecn=False).downlink == LinkParams()


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "1", None])
def test_a_non_bool_is_refused_with_the_field_named(value) -> None:
    (problem,) = _problems({"downlink": {"loss": "1%", "loss_ecn": value}})
    assert problem.startswith("downlink.loss_ecn: ") and "is not true or false (mark ECN-capable packets CE " \
        "instead of losing them (netem's ecn), for whichever loss model is set)" in problem, problem


def test_yaml_loads_and_dumps_it() -> None:
    text = """
name: ecn-bursts
description: bursty loss that ECN-capable flows see as CE marks
both:
  delay: 20ms
  gilbert_elliott: {p: 1%, r: 30%}
  loss_ecn: true
downlink:
  loss_ecn: false
"""
    (profile,) = loads_profiles(text)
    assert profile.uplink.loss_ecn is True and profile.downlink.loss_ecn is False
    assert profile.uplink.to_table_params()["loss_ecn"] == 1 and profile.downlink.to_table_params()["loss_ecn"] == 0
    dumped = dumps(profile)
    assert "loss_ecn: true" in dumped and "loss_ecn: false" not in dumped  # the default is left out
    (back,) = loads_profiles(dumped)
    assert back == profile
    # A misspelt field gets the hint.
    (problem,) = _problems({"downlink": {"loss": "1%", "loss_ecm": True}})
    assert problem == "downlink.loss_ecm: unknown field; did you mean 'loss_ecn'?"
    # The JSON schema says what it is.
    assert LinkParams.model_json_schema()["properties"]["loss_ecn"]["type"] == "boolean"


def test_the_summary_shows_it_next_to_the_loss() -> None:
    summary = {model: link_summary(_down(**link, loss_ecn=True).downlink) for model, link in MODELS.items()}
    assert summary == {
        "random": "loss 5% (ecn)",
        "correlated": "loss 5% (correlation 25%, ecn)",
        "gilbert_elliott": "loss GE p=1% r=20% (mean 4.76%, ecn)",
        "loss_state": "loss state p13=1% p31=30% p32=10% p23=50% p14=0.1% (ecn)",
    }
    assert link_summary(_down(loss="5%").downlink) == "loss 5%"
    assert link_summary(_down(gilbert_elliott=GE).downlink) == "loss GE p=1% r=20% (mean 4.76%)"
