"""netem's 4-state loss model on the wire (`loss state 2% 40% 20% 50% 1%`): the loss rate and the
mean loss burst agree with the chain's theory (bench/loss4_theory.py) within 4 standard errors,
the switch's counters split the losses into isolated ones (loss_random, state 4) and losses in a
burst (loss_burst, state 3) in the chain's proportion, and every loss on the wire is one of them."""

from __future__ import annotations

import sys
from pathlib import Path

from wirestats import prob, settled_counters

from p4netem.lab import TwoHostLab
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, DropReason

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from loss4_theory import State4, expected  # noqa: E402


def test_four_state_loss_matches_its_theory(lab: TwoHostLab) -> None:
    m, n = State4(p13=0.02, p31=0.40, p32=0.20, p23=0.50, p14=0.01), 30_000
    lab.impair(UPLINK, **{f"loss4_{k}": prob(getattr(m, k)) for k in ("p13", "p31", "p32", "p23", "p14")})
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=7500, port=9022)
    e = expected(m, n)
    loss = result.lost / n
    assert abs(loss / e.mean_loss - 1) <= 4 * e.rel_se_loss, f"loss {loss:.4f}, theory {e.mean_loss:.4f}"
    bursts = result.loss_bursts()
    mean_burst = sum(bursts) / len(bursts)
    assert abs(mean_burst / e.mean_burst - 1) <= 4 * e.rel_se_burst, f"burst {mean_burst:.3f}, theory {e.mean_burst:.3f}"
    c = settled_counters(lab, UPLINK)
    assert c.profile_in == n
    isolated, in_burst = c.drops[DropReason.LOSS_RANDOM], c.drops[DropReason.LOSS_BURST]
    assert isolated + in_burst == result.lost, (c.drops, result.lost)
    # Isolated losses are pi_4 / (pi_3 + pi_4) = 1/6 of them (binomial sd is plenty: they alternate
    # with state 1 only, so they hardly cluster).
    share = isolated / result.lost
    assert abs(share - 1 / 6) < 4 * (1 / 6 * 5 / 6 / result.lost) ** 0.5 + 0.01, f"isolated share {share:.3f}"
