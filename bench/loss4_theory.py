"""netem's 4-state loss model (`loss state p13 p31 p32 p23 p14`): what theory says a run of n
packets should show, and how precisely.

The chain is the kernel's (sch_netem.c loss_4state, Debian 12's 6.1): state 1 "received in a gap
period", 2 "received in a burst period", 3 "lost in a burst period", 4 "isolated loss in a gap
period"; per packet the state moves (1 -> 3 with p13, 1 -> 4 with p14, 3 -> 2 with p32, 3 -> 1 with
p31, 2 -> 3 with p23, 4 -> 1 always, else it stays) and the packet is lost when the new state is 3
or 4. The loss rate is the stationary mass of {3, 4}; bursts (runs of consecutive losses) and gaps
(runs of deliveries) are functions of the pair chain (S_{t-1}, S_t), whose standard errors follow
from the fundamental matrix as in ge_theory (asymptotic_cov) and the delta method for the ratios.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ge_theory import Expected, expected_of_chain


@dataclass(frozen=True)
class State4:
    p13: float
    p31: float
    p32: float
    p23: float
    p14: float

    def netem(self) -> str:
        return (f"loss state {100 * self.p13:g}% {100 * self.p31:g}% {100 * self.p32:g}% "
                f"{100 * self.p23:g}% {100 * self.p14:g}%")

    def matrix(self) -> np.ndarray:
        """Transition matrix over states 1..4 (indices 0..3)."""
        p = np.zeros((4, 4))
        p[0] = [1 - self.p13 - self.p14, 0, self.p13, self.p14]
        p[1] = [0, 1 - self.p23, self.p23, 0]
        p[2] = [self.p31, self.p32, 1 - self.p31 - self.p32, 0]
        p[3] = [1, 0, 0, 0]
        return p


LOST = np.array([0.0, 0.0, 1.0, 1.0])


def stationary(pmat: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eig(pmat.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    return pi / pi.sum()


def expected(m: State4, n: int) -> Expected:
    one = m.matrix()
    return expected_of_chain(one, stationary(one), LOST, n)


def simulate(m: State4, n: int, rng: np.random.Generator) -> np.ndarray:
    """n per-packet outcomes (True = lost), starting in state 1 (a plain loop: for tests only)."""
    cum = np.cumsum(m.matrix(), axis=1)
    s, out = 0, np.zeros(n, dtype=bool)
    u = rng.random(n)
    for i in range(n):
        s = int(np.searchsorted(cum[s], u[i], side="right"))
        s = min(s, 3)
        out[i] = s >= 2
    return out
