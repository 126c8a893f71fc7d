"""The on/off link on the wire (Mahimahi's mm-onoff; contract stage 3, set_impairment.onoff_*).

The link is on and off for exponential periods; a packet that finds it off is dropped with reason
link_off. Seen by packets dt apart, the link is a Gilbert chain (bench/onoff.py), so the share of
probes lost and the mean run of consecutive losses must agree with that chain's theory; a Bernoulli
loss of the same share would give runs of about one packet. The parameters come from the profile
schema, as `p4netem apply` writes them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from wirestats import settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, DropReason

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from ge_theory import expected, measure  # noqa: E402
from onoff import onoff_params, sampled_chain, spacing_ns  # noqa: E402


def test_a_link_that_goes_off_for_good_drops_every_later_packet(lab: TwoHostLab) -> None:
    # On for 10 us on average, off for 10 h: on at the direction's first packet, then off (1 ms
    # later P(on) = pi + (1 - pi) e^-100, pi 2.8e-10).
    lab.impair(UPLINK, **onoff_params("10us", "10h"))
    n = 300
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=1000, port=9051)
    assert result.lost >= n - 1, f"{result.lost} of {n} lost"
    assert set(result.seq) <= {0}, "only the first packet can find the link on"
    c = settled_counters(lab, UPLINK)
    assert c.drops[DropReason.LINK_OFF] >= result.lost and c.dropped == c.drops[DropReason.LINK_OFF], c.drops


def test_packets_see_the_on_off_chain(lab: TwoHostLab) -> None:
    params = onoff_params("20ms", "5ms")
    lab.impair(UPLINK, **params)
    n, rate = 20_000, 5000
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=rate, port=9052)
    lost = np.ones(result.sent, dtype=bool)
    lost[np.asarray(result.seq)] = False
    dt_ns, _ = spacing_ns(result.seq, result.tx_ns)
    theory = expected(sampled_chain(params, dt_ns), result.sent)
    m = measure(lost)
    # 5 standard errors: the share lost (theory 20 %) and the mean run of losses (about 25 packets
    # at 5000/s; a Bernoulli 20 % loss would give 1.25).
    assert abs(m.mean_loss / theory.mean_loss - 1) <= 5 * theory.rel_se_loss, (m, theory)
    assert abs(m.mean_burst / theory.mean_burst - 1) <= 5 * theory.rel_se_burst, (m, theory)
    c = settled_counters(lab, UPLINK)
    assert c.drops[DropReason.LINK_OFF] == c.dropped >= result.lost, c.drops
    assert c.dropped - result.lost <= 5, "only probes (and the odd stray packet) go through this profile"
