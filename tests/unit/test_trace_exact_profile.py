"""Exact trace delivery as a profile field: the placement block, its table encoding both ways (with the
period's reciprocal the data plane multiplies by), the settings it excludes, and the per-ms index
the controller loads next to the timestamps."""

from __future__ import annotations

import pytest

from p4netem.control.trace import MahimahiTrace
from p4netem.control.trace_tables import _free, first_at_index
from p4netem.profiles import Profile, ProfileError


def _down(**link) -> Profile:
    return Profile.parse({"name": "t", "downlink": link})


def test_trace_placement_encodes_and_reads_back() -> None:
    p = _down(trace={"opportunities": 4386, "period": 10000, "cells": 12, "index_cells": 40}, queue=100)
    params = p.downlink.to_table_params()
    assert {k: v for k, v in params.items() if k.startswith("trace_")} == {
        "trace_base": 12, "trace_len": 4386, "trace_ms_base": 40, "trace_period_ms": 10000,
        "trace_period_recip": 2**64 // 10**10}
    assert params["ns_per_byte_q16"] == 0
    back = Profile.from_table_params("t", p.uplink.to_table_params(), params, None)
    assert back.downlink == p.downlink
    assert all(v == 0 for k, v in _down(delay="1ms").downlink.to_table_params().items() if k.startswith("trace_"))


@pytest.mark.parametrize("link, field, words", [
    ({"trace": {"opportunities": 3, "period": 10}, "rate": "1mbit"}, "downlink.rate", "not used with a trace"),
    ({"trace": {"opportunities": 3, "period": 10}, "aqm": {"kind": "codel", "ecn": True, "target": "0ms"}},
     "downlink.aqm", "target"),
    ({"trace": {"opportunities": 0, "period": 10}}, "downlink.trace.opportunities", "1..4294967295"),
    ({"trace": {"opportunities": 3}}, "downlink.trace.period", "required"),
])
def test_bad_trace_settings_name_the_field(link, field, words) -> None:
    with pytest.raises(ProfileError) as err:
        _down(**link)
    assert field in str(err.value) and words in str(err.value), str(err.value)


def test_a_traced_direction_takes_an_aqm_as_mm_link_does() -> None:
    """Mahimahi's `--downlink-queue=codel --downlink-queue-args=packets=100,target=5,interval=100`:
    CoDel (or RED) on the trace's queue, encoded as on the rate's clock; without a trace or a rate
    an AQM still has no queue to manage."""
    p = _down(trace={"opportunities": 3, "period": 10, "cells": 0, "index_cells": 0}, queue=100,
              aqm={"kind": "codel", "target": "5ms", "interval": "100ms", "ecn": True})
    params = p.downlink.to_table_params()
    assert (params["aqm"], params["codel_target_ns"], params["codel_interval_ns"], params["ecn"]) == \
        (1, 5_000_000, 100_000_000, 1)
    assert params["trace_len"] == 3 and params["ns_per_byte_q16"] == 0
    assert Profile.from_table_params("t", p.uplink.to_table_params(), params, None).downlink == p.downlink
    assert _down(trace={"opportunities": 3, "period": 10}, aqm={"kind": "red", "max": "90KB"}).downlink.aqm.kind.value == "red"
    with pytest.raises(ProfileError, match="needs a rate or a trace"):
        _down(aqm="codel")


def test_first_at_index_and_free_cells() -> None:
    t = MahimahiTrace((2, 2, 5, 9))
    # For each ms 0..9: the first opportunity at or after it.
    assert first_at_index(t) == [0, 0, 0, 2, 2, 2, 3, 3, 3, 3]
    assert _free([], 4, 100, "x") == 0
    assert _free([(0, 4), (10, 5)], 6, 100, "x") == 4
    assert _free([(0, 4), (10, 5)], 7, 100, "x") == 15
    with pytest.raises(ProfileError, match="needs 90 free cells"):
        _free([(0, 4), (10, 5)], 90, 100, "x")


def test_a_both_field_is_named_where_it_was_written() -> None:
    from p4netem.control.trace import traced_profile
    # Expanded by traced_profile: a bad value given under `both` is one problem, not one per direction.
    with pytest.raises(ProfileError) as err:
        traced_profile({"name": "t", "both": {"queue": "lots"}}, {"downlink": {"rate": "1Mbit"}})
    assert [p.path for p in err.value.problems] == ["both.queue"], err.value
    # A `both` rate both directions override is checked (Profile.parse checks it too).
    with pytest.raises(ProfileError) as err:
        traced_profile({"name": "t", "both": {"rate": "fast"}, "uplink": {"rate": "1Mbit"},
                        "downlink": {"rate": "1Mbit"}}, {"downlink": {"rate": "1Mbit"}})
    assert [p.path for p in err.value.problems] == ["both.rate"], err.value
    # What only one direction lacks stays that direction's: the untraced uplink has no rate.
    with pytest.raises(ProfileError) as err:
        traced_profile({"name": "t", "both": {"queue": 100}}, {"downlink": {"rate": "1Mbit"}})
    assert [p.path for p in err.value.problems] == ["uplink.queue"], err.value
