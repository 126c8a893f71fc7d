"""The one-line summary of a direction (`p4netem show`, `apply`, the web API) names every model that
is on: a trace-driven direction, its queue and AQM, RED, PIE, bearers, netem's slots and the on/off link are
not left out (a traced direction with CoDel read "no impairment" before)."""

from __future__ import annotations

import pytest

from p4netem.profiles import Profile
from p4netem.profiles.summary import link_summary

TRACE = {"opportunities": 4386, "period": 10000, "cells": 0, "index_cells": 0}


@pytest.mark.parametrize("link, want", [
    ({"trace": TRACE, "queue": 100, "aqm": {"kind": "codel", "ecn": True}},
     "trace 4386 opportunities / 10000 ms (mean 5.31 Mbit/s), queue 100 pkt, "
     "codel (target 5ms, interval 100ms, ecn)"),
    ({"trace": {"opportunities": 3, "period": 1000}}, "trace 3 opportunities / 1000 ms (mean 36.3 kbit/s)"),
    ({"rate": "10mbit", "queue": 1000, "aqm": {"kind": "red", "max": "90KB", "gentle": True}},
     "rate 10Mbit, queue 1000 pkt, red (min 30KB, max 90KB, p 2%, gentle)"),
    ({"rate": "10mbit", "aqm": "codel"}, "rate 10Mbit, codel (target 5ms, interval 100ms)"),
    ({"trace": TRACE, "queue": 100, "aqm": "pie"},
     "trace 4386 opportunities / 10000 ms (mean 5.31 Mbit/s), queue 100 pkt, pie (target 15ms, tupdate 15ms)"),
    ({"rate": "10mbit", "bearers": "drr"}, "rate 10Mbit, bearers drr (quantum 1514B)"),
    ({"rate": "10mbit", "bearers": {"scheduler": "pf", "halflife": "100ms"}},
     "rate 10Mbit, bearers pf (halflife 134.217728ms)"),
    ({"delay": "10ms", "slot": {"min": "5ms", "packets": 4}}, "delay 10ms, slot 5ms (packets 4)"),
    ({"slot": {"min": "5ms", "max": "8ms", "bytes": "3KB"}}, "slot 5ms..8ms (bytes 3KB)"),
    ({"slot": {"distribution": "normal", "delay": "10ms", "jitter": "2ms"}}, "slot normal 10ms 2ms"),
    ({"onoff": {"mean_on": "10s", "mean_off": "2s"}}, "on/off link (mean on 10s, off 2s: off 16.7%)"),
    ({"delay": "20ms", "onoff": {"mean_on": "500ms", "mean_off": "50ms"}, "loss": "1%"},
     "delay 20ms, on/off link (mean on 500ms, off 50ms: off 9.09%), loss 1%"),
    ({}, "no impairment"),
])
def test_every_model_that_is_on_is_named(link, want) -> None:
    assert link_summary(Profile.parse({"name": "t", "downlink": link}).downlink) == want
