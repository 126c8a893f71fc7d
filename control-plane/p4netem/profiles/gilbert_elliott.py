"""The Gilbert-Elliott bursty-loss model of a profile direction, and its statistics.

Two states, good and bad. Per packet the data plane first moves (good->bad with p, bad->good
with r) and then loses the packet with the new state's loss probability (loss_good, netem's
1-k; loss_bad, netem's 1-h). All four are percents, like every probability of a profile.

Statistics (stationary chain, exact for those semantics):
  P(bad)          = p / (p + r)
  mean loss       = P(bad) * loss_bad + P(good) * loss_good
  mean burst      = P(lost) / P(lost now, next kept)        (mean run of consecutive losses)
With loss_good = 0 the last one is 1 / (1 - (1 - r) * loss_bad), i.e. 1/r for loss_bad = 100%.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from pydantic import BaseModel, ConfigDict

from .errors import KNOWN_FIELDS
from .fields import PositiveProbability, Probability
from .units import Percent, fraction_to_prob, prob_to_percent

__all__ = ["GilbertElliott"]


def _quantised_percent(fraction: Fraction) -> Percent:
    """The shortest percent with the same bit<32> encoding as an exact probability."""
    return prob_to_percent(fraction_to_prob(fraction))


class GilbertElliott(BaseModel):
    """Bursty loss: `p` good->bad and `r` bad->good per packet, loss in each state."""

    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    p: PositiveProbability
    r: Probability
    loss_good: Probability = Percent(0)
    loss_bad: Probability = Percent(100)

    # ---- statistics ------------------------------------------------------------------------
    def _fractions(self) -> tuple[Fraction, Fraction, Fraction, Fraction]:
        return (self.p.fraction, self.r.fraction, self.loss_good.fraction,
                self.loss_bad.fraction)

    @property
    def bad_share(self) -> float:
        """Stationary probability of the bad state."""
        p, r, _, _ = self._fractions()
        return float(p / (p + r))

    @property
    def mean_loss(self) -> float:
        """Long-run loss probability, as a fraction (0..1)."""
        p, r, k, h = self._fractions()
        return float((p * h + r * k) / (p + r))

    @property
    def mean_burst(self) -> float:
        """Mean number of consecutive lost packets (inf if a loss run never ends)."""
        p, r, k, h = self._fractions()
        bad, good = p / (p + r), r / (p + r)
        lost = bad * h + good * k
        if lost == 0:
            return 0.0
        # P(lost at t and kept at t+1), summing over the state at t and at t+1
        lost_then_kept = (bad * h * ((1 - r) * (1 - h) + r * (1 - k))
                          + good * k * (p * (1 - h) + (1 - p) * (1 - k)))
        if lost_then_kept == 0:
            return float("inf")
        return float(lost / lost_then_kept)

    # ---- construction from the statistics people quote -------------------------------------
    @classmethod
    def from_burst(cls, mean_loss: object, mean_burst: float | Decimal | str,
                   loss_bad: object = Percent(100)) -> "GilbertElliott":
        """The model with long-run loss `mean_loss` (percent, like every profile probability)
        and mean loss-burst length `mean_burst` (packets), with loss_good = 0.

        Solves mean_burst = 1 / (1 - (1 - r) * h) and mean_loss = p * h / (p + r), h = loss_bad.
        The result is quantised like the data plane does, so its statistics match those
        targets to within a 2^-32 step of p and r.
        """
        loss = Percent.parse(mean_loss).fraction
        h = Percent.parse(loss_bad).fraction
        burst = Fraction(Decimal(str(mean_burst)))
        if burst < 1:
            raise ValueError(f"mean_burst {mean_burst} must be at least 1 packet")
        if not 0 < loss < h:
            raise ValueError(f"mean_loss {Percent.parse(mean_loss)} must be above 0% and below "
                             f"loss_bad {Percent.parse(loss_bad)}")
        r = 1 - (1 - 1 / burst) / h
        if not 0 < r <= 1:
            raise ValueError(f"mean_burst {mean_burst} is unreachable with loss_bad "
                             f"{Percent.parse(loss_bad)}: at most {float(1 / (1 - h)):.6g} packets")
        p = r * loss / (h - loss)
        if p > 1:
            raise ValueError(f"mean_loss {Percent.parse(mean_loss)} with mean_burst {mean_burst} "
                             "needs p above 100%")
        return cls(p=_quantised_percent(p), r=_quantised_percent(r),
                   loss_good=Percent(0), loss_bad=Percent.parse(loss_bad))


KNOWN_FIELDS.update(GilbertElliott.model_fields)
