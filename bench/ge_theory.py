"""Gilbert-Elliott loss: what theory says a run of n packets should show, and how precisely.

The model is the data plane's (dataplane/src/stage/loss.rs, p4netem.profiles.GilbertElliott): per
packet the state first moves (good -> bad with p, bad -> good with r), then the packet is lost with
the new state's probability (loss_good = netem's 1-k, loss_bad = netem's 1-h).

Means (exact for the stationary chain): the long-run loss m, the mean loss burst (run of
consecutive losses) m / P(kept, then lost) and the mean gap (run of consecutive deliveries)
(1 - m) / P(lost, then kept); both transitions are equally frequent. With loss_good = 0 and
loss_bad = 1 (h = 0, k = 1) the loss state is the chain's state: bursts are geometric with mean 1/r,
gaps with mean 1/p, and m = p / (p + r).

Standard errors: the three figures are a mean and two ratios of means of functions of a finite
ergodic Markov chain, the pair chain W_t = (S_{t-1}, S_t) over S_t = (state, lost) (16 states).
For such functions the central limit theorem holds with the asymptotic covariance

    Sigma_ij = <f_i, f_j> + <f_i, (Z - I) f_j> + <f_j, (Z - I) f_i>      (centred f, <.,.> under pi)

where Z = (I - P + 1 pi^T)^-1 is the chain's fundamental matrix (Kemeny & Snell); the ratios get
theirs by the delta method. That is the standard error a run of n packets has before it starts,
i.e. what "within 5 %" must be compared with.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GEParams:
    p: float  # good -> bad, per packet
    r: float  # bad -> good, per packet
    loss_good: float  # netem 1-k
    loss_bad: float  # netem 1-h

    def netem(self) -> str:
        """The same model as a netem command line (`loss gemodel p r 1-h 1-k`, percents)."""
        return (f"loss gemodel {100 * self.p:g}% {100 * self.r:g}% {100 * self.loss_bad:g}% "
                f"{100 * self.loss_good:g}%")


@dataclass(frozen=True)
class Expected:
    mean_loss: float
    mean_burst: float
    mean_gap: float
    # Standard errors of the estimates from n packets, as fractions of the mean (relative).
    rel_se_loss: float
    rel_se_burst: float
    rel_se_gap: float
    bursts: float  # expected number of loss bursts in n packets


def _one_step_chain(g: GEParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Transition matrix and stationary law of S = (state, lost) as index 2 * state + lost
    (state 0 good, 1 bad), and the `lost` flag of each S."""
    move = np.array([[1 - g.p, g.p], [g.r, 1 - g.r]])
    lose = np.array([g.loss_good, g.loss_bad])
    one = np.zeros((4, 4))
    for x in range(2):
        for y in range(2):
            one[2 * x, 2 * y + 1] = one[2 * x + 1, 2 * y + 1] = move[x, y] * lose[y]
            one[2 * x, 2 * y] = one[2 * x + 1, 2 * y] = move[x, y] * (1 - lose[y])
    bad = g.p / (g.p + g.r)
    pi1 = np.array([(1 - bad) * (1 - lose[0]), (1 - bad) * lose[0], bad * (1 - lose[1]), bad * lose[1]])
    return one, pi1, np.array([0.0, 1.0, 0.0, 1.0])


def asymptotic_cov(pmat: np.ndarray, pi: np.ndarray, funcs: np.ndarray) -> np.ndarray:
    """n * Cov of the sample means of `funcs` (columns) over n steps of the stationary chain."""
    n = len(pi)
    f = funcs - pi @ funcs
    z = np.linalg.inv(np.eye(n) - pmat + np.outer(np.ones(n), pi))
    d = np.diag(pi)
    cross = f.T @ d @ (z - np.eye(n)) @ f
    return f.T @ d @ f + cross + cross.T


def expected(g: GEParams, n: int) -> Expected:
    return expected_of_chain(*_one_step_chain(g), n)


def expected_of_chain(one: np.ndarray, pi1: np.ndarray, lost: np.ndarray, n: int) -> Expected:
    """Expected figures of n packets of any loss chain (Gilbert-Elliott, netem's 4-state model):
    its one-step transition matrix, stationary law and each state's lost flag. The figures are
    functions of pairs of consecutive states W_t = (S_{t-1}, S_t), index k * prev + cur: a burst
    starts where a kept packet is followed by a lost one and ends the other way round."""
    k = len(lost)
    pmat = np.zeros((k * k, k * k))
    for a in range(k):
        for b in range(k):
            pmat[k * a + b, k * b:k * b + k] = one[b]
    pi = np.array([pi1[a] * one[a, b] for a in range(k) for b in range(k)])
    prev = np.repeat(lost, k)  # lost flag of S_{t-1} for each W index
    cur = np.tile(lost, k)  # lost flag of S_t
    funcs = np.column_stack([cur, 1 - cur, (1 - prev) * cur, prev * (1 - cur)])
    mean = pi @ funcs
    cov = asymptotic_cov(pmat, pi, funcs) / n
    m, kept, starts, ends = mean

    def ratio_se(i: int, j: int) -> float:
        # Delta method for mean_i / mean_j.
        grad = np.zeros(4)
        grad[i], grad[j] = 1 / mean[j], -mean[i] / mean[j] ** 2
        return math.sqrt(grad @ cov @ grad) / (mean[i] / mean[j])

    return Expected(mean_loss=float(m), mean_burst=float(m / starts), mean_gap=float(kept / ends),
                    rel_se_loss=math.sqrt(cov[0, 0]) / m, rel_se_burst=ratio_se(0, 2),
                    rel_se_gap=ratio_se(1, 3), bursts=float(n * starts))


def judge(measured: float, want: float, rel_se: float) -> dict:
    """One figure against its theory: the relative error and how many standard errors it is."""
    err = measured / want - 1
    return {"measured": measured, "theory": want, "error_pct": 100 * err, "se_pct": 100 * rel_se,
            "sigma": abs(err / rel_se)}


@dataclass(frozen=True)
class Measured:
    mean_loss: float  # over all packets
    mean_burst: float  # over the inner bursts (see runs)
    mean_gap: float
    bursts: int
    gaps: int


def measure(lost) -> Measured:
    """The three figures of one sequence of per-packet outcomes (True = lost), as the bench and the
    tests compute them: the loss over every packet, burst and gap means over the runs that lie
    wholly inside the sequence (the same runs as `runs`, vectorised for long sequences)."""
    x = np.asarray(lost, dtype=bool)
    # Run boundaries: index where a run starts; a run ends where the next starts.
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    lengths = np.diff(np.r_[starts, len(x)])
    kinds = x[starts]
    inner_len, inner_kind = lengths[1:-1], kinds[1:-1]
    b, g = inner_len[inner_kind], inner_len[~inner_kind]
    nan = float("nan")
    return Measured(mean_loss=float(x.mean()) if len(x) else nan,
                    mean_burst=float(b.mean()) if len(b) else nan,
                    mean_gap=float(g.mean()) if len(g) else nan, bursts=len(b), gaps=len(g))


def simulate(g: GEParams, n: int, rng: np.random.Generator) -> np.ndarray:
    """n per-packet outcomes (True = lost) of the model, vectorised: the state chain's sojourns are
    geometric (good lasts Geometric(p) packets, bad Geometric(r)), the loss is drawn per packet
    from the state. Starts in good, as the data plane's register does."""
    mean_cycle = 1 / g.p + 1 / g.r
    cycles = int(n / mean_cycle * 1.2) + 16
    while True:
        good = rng.geometric(g.p, cycles)
        bad = rng.geometric(g.r, cycles)
        # A sojourn in good lasts k >= 1 packets with probability (1 - p)^(k-1) p: numpy's
        # geometric. (The data plane's register starts in good before the first packet, so its
        # first good run is one shorter; immaterial over a long sequence.)
        lengths = np.column_stack([good, bad]).ravel()
        if lengths.sum() >= n:
            break
        cycles *= 2
    state = np.repeat(np.tile([False, True], cycles), lengths)[:n]
    prob = np.where(state, g.loss_bad, g.loss_good)
    return rng.random(n) < prob


def runs(lost: list[bool]) -> tuple[list[int], list[int]]:
    """Lengths of the runs of losses (bursts) and of deliveries (gaps), without the first and the
    last run of the sequence (cut by its ends, they would be short by an unknown amount)."""
    lengths: list[tuple[bool, int]] = []
    for x in lost:
        if lengths and lengths[-1][0] == x:
            lengths[-1] = (x, lengths[-1][1] + 1)
        else:
            lengths.append((x, 1))
    inner = lengths[1:-1]
    return [k for x, k in inner if x], [k for x, k in inner if not x]
