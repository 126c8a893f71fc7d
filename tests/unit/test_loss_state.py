"""netem's 4-state loss model as a profile field: iproute2's defaults, field-named errors, the
table encoding both ways, `loss state ...` from netem options, and the theory the bench compares
the wire with (bench/loss4_theory.py) against a simulation of the chain."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from p4netem.profiles import Profile, ProfileError
from p4netem.profiles.netem import profile_from_netem

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from ge_theory import measure  # noqa: E402
from loss4_theory import State4, expected, simulate  # noqa: E402


def _down(**link) -> Profile:
    return Profile.parse({"name": "l4", "downlink": link})


def test_iproute2_defaults_and_table_round_trip() -> None:
    s = _down(loss_state={"p13": "2%"}).downlink.loss_state
    assert [str(getattr(s, n)) for n in ("p13", "p31", "p32", "p23", "p14")] == ["2%", "98%", "0%", "100%", "0%"]
    p = _down(loss_state={"p13": "2%", "p31": "40%", "p32": "20%", "p23": "50%", "p14": "1%"})
    params = p.downlink.to_table_params()
    assert (params["loss4_p13"], params["loss4_p14"], params["loss4_p23"]) == \
        (round(0.02 * 2**32), round(0.01 * 2**32), 2**31)
    assert params["loss_prob"] == params["ge_p"] == 0
    back = Profile.from_table_params("l4", p.uplink.to_table_params(), params, None)
    assert back.downlink == p.downlink
    assert all(v == 0 for k, v in _down(loss="1%").downlink.to_table_params().items() if k.startswith("loss4_"))


@pytest.mark.parametrize("link, field, words", [
    ({"loss_state": {"p13": "60%", "p14": "50%"}}, "downlink.loss_state.p14", "at most 100%"),
    ({"loss_state": {"p13": "10%", "p31": "80%", "p32": "30%"}}, "downlink.loss_state.p32", "at most 100%"),
    ({"loss_state": {"p13": 0}}, "downlink.loss_state.p13", "never leaves state 1"),
    ({"loss_state": {"p13": "1%"}, "loss": "1%"}, "downlink.loss_state", "a loss model of its own"),
    ({"loss_state": {"p13": "101%"}}, "downlink.loss_state.p13", "0..100%"),
    ({"loss_state": {"p31": "1%"}}, "downlink.loss_state.p13", "required"),
])
def test_bad_loss_state_names_the_field(link, field, words) -> None:
    with pytest.raises(ProfileError) as err:
        _down(**link)
    assert field in str(err.value) and words in str(err.value), str(err.value)


def test_netem_loss_state() -> None:
    p, warnings = profile_from_netem("loss state 2% 40% 20% 50% 1%")
    assert warnings == []
    s = p.downlink.loss_state
    assert [str(getattr(s, n)) for n in ("p13", "p31", "p32", "p23", "p14")] == ["2%", "40%", "20%", "50%", "1%"]
    # p32 and p14 zero: the Gilbert model, which the Gilbert-Elliott stage runs exactly.
    ge = profile_from_netem("loss state 2% 30%")[0].downlink
    assert ge.loss_state is None and (str(ge.gilbert_elliott.p), str(ge.gilbert_elliott.r)) == ("2%", "30%")
    # Only isolated losses (p13 0, p14 above 0) is still the 4-state model.
    assert str(profile_from_netem("loss state 0 100% 0 100% 1%")[0].downlink.loss_state.p14) == "1%"
    assert profile_from_netem("loss state 0")[0].downlink.passthrough


def test_theory_matches_a_simulation_of_the_chain() -> None:
    m = State4(p13=0.02, p31=0.4, p32=0.2, p23=0.5, p14=0.01)
    n = 100_000
    e = expected(m, n)
    assert e.mean_loss == pytest.approx(1 / 18)  # pi_3 + pi_4
    got = measure(simulate(m, n, np.random.default_rng(3)))
    assert abs(got.mean_loss / e.mean_loss - 1) < 4 * e.rel_se_loss
    assert abs(got.mean_burst / e.mean_burst - 1) < 4 * e.rel_se_burst
