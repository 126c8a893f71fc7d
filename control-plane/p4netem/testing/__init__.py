"""Regression testing of users' own applications under p4netem (docs/regression.md): a pytest
plugin (entry point `pytest11: p4netem`) with a lab fixture, profiles applied for a test's
duration, and a baseline that fails the test when a metric got worse than last time."""

from .baseline import Baseline, BaselineError, Comparison, compare

__all__ = ["Baseline", "BaselineError", "Comparison", "compare"]
