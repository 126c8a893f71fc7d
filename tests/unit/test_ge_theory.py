"""bench/ge_theory.py: the Gilbert-Elliott means and standard errors the bench judges the switch
against. Checked against closed forms where they exist and against a seeded simulation of the model
(deterministic, well under a second)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from ge_theory import GEParams, expected, measure, runs, simulate  # noqa: E402


@pytest.mark.parametrize("p,r", [(0.01, 0.25), (0.1, 0.5), (0.3, 0.2)])
def test_simple_gilbert_closed_forms(p: float, r: float) -> None:
    # h = 0, k = 1: the loss is the state. Bursts ~ Geometric(r), gaps ~ Geometric(p), loss p/(p+r);
    # the loss fraction is a two-state chain's occupation (eigenvalue 1 - p - r), and burst/gap means
    # are means of independent geometric runs (renewal), so their errors have closed forms too.
    n = 100_000
    e = expected(GEParams(p, r, loss_good=0.0, loss_bad=1.0), n)
    pb, lam = p / (p + r), 1 - p - r
    assert e.mean_loss == pytest.approx(pb, rel=1e-12)
    assert e.mean_burst == pytest.approx(1 / r, rel=1e-12)
    assert e.mean_gap == pytest.approx(1 / p, rel=1e-12)
    assert e.bursts == pytest.approx(n * pb * r, rel=1e-12)
    assert e.rel_se_loss == pytest.approx(math.sqrt(pb * (1 - pb) * (1 + lam) / (1 - lam) / n) / pb, rel=1e-9)
    assert e.rel_se_burst == pytest.approx(math.sqrt((1 - r) / e.bursts), rel=1e-9)
    assert e.rel_se_gap == pytest.approx(math.sqrt((1 - p) / e.bursts), rel=1e-9)


def test_equal_loss_in_both_states_is_bernoulli() -> None:
    q, n = 0.02, 50_000
    e = expected(GEParams(0.05, 0.3, loss_good=q, loss_bad=q), n)
    assert e.mean_loss == pytest.approx(q, rel=1e-12)
    assert e.mean_burst == pytest.approx(1 / (1 - q), rel=1e-12)
    assert e.mean_gap == pytest.approx(1 / q, rel=1e-12)
    assert e.rel_se_loss == pytest.approx(math.sqrt((1 - q) / (q * n)), rel=1e-9)


def test_standard_errors_shrink_as_root_n() -> None:
    g = GEParams(0.05, 0.3, 0.001, 0.9)
    a, b = expected(g, 10_000), expected(g, 40_000)
    for x, y in ((a.rel_se_loss, b.rel_se_loss), (a.rel_se_burst, b.rel_se_burst), (a.rel_se_gap, b.rel_se_gap)):
        assert x / y == pytest.approx(2.0, rel=1e-9)


GENERAL = GEParams(p=0.05, r=0.3, loss_good=0.001, loss_bad=0.9)


def test_means_match_a_long_simulation() -> None:
    n = 400_000
    e = expected(GENERAL, n)
    m = measure(simulate(GENERAL, n, np.random.default_rng(7)))
    for got, want, se in ((m.mean_loss, e.mean_loss, e.rel_se_loss), (m.mean_burst, e.mean_burst, e.rel_se_burst),
                          (m.mean_gap, e.mean_gap, e.rel_se_gap)):
        assert abs(got / want - 1) < 4 * se, (got, want, se)
    assert m.bursts == pytest.approx(e.bursts, rel=0.05)


def test_standard_errors_match_the_spread_of_replicates() -> None:
    # 300 independent runs of 20 000 packets: the spread of each figure is the standard error the
    # theory predicts (the relative error of a standard deviation from 300 samples is ~4 %).
    n, reps = 20_000, 300
    rng = np.random.default_rng(11)
    e = expected(GENERAL, n)
    got = [measure(simulate(GENERAL, n, rng)) for _ in range(reps)]
    for name, se in (("mean_loss", e.rel_se_loss), ("mean_burst", e.rel_se_burst), ("mean_gap", e.rel_se_gap)):
        v = np.array([getattr(m, name) for m in got])
        assert abs(v.mean() / getattr(e, name) - 1) < 4 * se / math.sqrt(reps), name
        assert v.std(ddof=1) / v.mean() == pytest.approx(se, rel=0.15), name


def test_runs_leave_out_the_runs_cut_by_the_ends() -> None:
    seq = [True, False, False, True, True, True, False, True, False, False, False, True, True]
    # Runs: L1 G2 L3 G1 L1 G3 L2: the first and the last are cut by the sequence's ends.
    assert runs(seq) == ([3, 1], [2, 1, 3])
    m = measure(seq)
    assert (m.mean_burst, m.mean_gap, m.bursts, m.gaps) == (2.0, 2.0, 2, 3)
    assert m.mean_loss == pytest.approx(7 / 13)


def test_measure_agrees_with_runs_on_a_simulated_sequence() -> None:
    x = simulate(GENERAL, 30_000, np.random.default_rng(3))
    bursts, gaps = runs(list(x))
    m = measure(x)
    assert (m.bursts, m.gaps) == (len(bursts), len(gaps))
    assert m.mean_burst == pytest.approx(sum(bursts) / len(bursts))
    assert m.mean_gap == pytest.approx(sum(gaps) / len(gaps))


def test_netem_spelling() -> None:
    assert GEParams(0.05, 0.3, 0.001, 0.9).netem() == "loss gemodel 5% 30% 90% 0.1%"


@pytest.mark.parametrize("g", [GENERAL, GEParams(0.01, 0.25, 0.0, 1.0), GEParams(0.3, 0.2, 0.05, 0.5)])
def test_theory_agrees_with_the_profile_model_netem_parses(g: GEParams) -> None:
    # The bench's `netem` label, read by p4netem's own netem parser, is the model the profile
    # statistics (what the CLI shows) describe; their closed forms and the pair chain's means agree.
    from p4netem.profiles.netem import profile_from_netem

    profile, problems = profile_from_netem(g.netem())
    assert problems == []
    model = profile.uplink.gilbert_elliott
    e = expected(g, 10_000)
    assert model.mean_loss == pytest.approx(e.mean_loss, rel=1e-9)
    assert model.mean_burst == pytest.approx(e.mean_burst, rel=1e-9)
