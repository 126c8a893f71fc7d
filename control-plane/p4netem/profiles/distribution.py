"""Jitter distribution tables: netem's `.dist` files and tables built from measured delays.

The switch's `dist_table` register holds four tables of TABLE_LEN int16 cells (normal, pareto,
paretonormal, user; docs/pipeline-contract.md). A jitter sample is
`table[u % TABLE_LEN] * jitter / DIST_SCALE`, u uniform: each cell is drawn with the same
probability, so a table is the inverse CDF of a zero-mean, unit-sigma distribution in units of
sigma / 8192 (netem's NETEM_DIST_SCALE), and the profile's `jitter` is the sigma. The first three
are built into the switch; the user table (zeros until written) is what this module makes:

    table = load_dist("experimental.dist")             # an iproute2/netem table file
    table = load_samples("delays.txt")                 # measured delays, like iproute2's maketable
    ctl.load_distribution(table)                       # then jitter_distribution: user

`.dist` format (iproute2 tc/q_netem.c reads it): integers separated by white space, `#` starts a
comment. tc accepts up to 16384 entries and draws `table[u % n]`; the switch's table has exactly
4096 cells, so a file must have 4096 entries (what maketable and iproute2's own tables have), or a
power of two below it, which is tiled (cell i = entry i % n: exactly netem's draw, as u % 4096 % n
== u % n). Any other count would change the distribution, so it is refused, not resampled.

From samples (maketable's construction, not its code): the samples are standardised with their
mean and sample standard deviation, and cell i is their empirical quantile at probability
(i + 0.5) / 4096, times 8192, clamped to +/-32767 (beyond +/-4 sigma, as maketable clamps). The
mean and sigma are reported: they are the profile's delay and jitter that reproduce the samples.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import Problem, ProfileError
from .units import quote

__all__ = ["TABLE_LEN", "DIST_SCALE", "INT16_MIN", "INT16_MAX", "DistTable", "parse_dist", "load_dist",
           "parse_samples", "load_samples", "table_from_samples", "check_table", "find_netem_dist",
           "format_dist", "table_summary", "summary_line"]

TABLE_LEN = 4096  # cells per table of dist_table (the contract's DIST_TABLE_LEN)
DIST_SCALE = 8192  # a cell of DIST_SCALE is one sigma (netem's NETEM_DIST_SCALE)
INT16_MIN, INT16_MAX = -32768, 32767
_MAX_PROBLEMS = 10  # problems listed per file; the rest are counted

# C's strtol(base 0), as tc reads a table: 0x hex, a leading 0 octal, else decimal.
_C_INT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_OCTAL = re.compile(r"[+-]?0[0-7]+")


@dataclass(frozen=True)
class DistTable:
    """TABLE_LEN int16 cells (sigma / 8192 units), where they came from, and, when built from
    samples, the samples' mean and sigma in their own unit."""

    values: tuple[int, ...]
    source: str
    entries: int  # entries read from a .dist file (TABLE_LEN or a power of two below), or TABLE_LEN
    samples: int = 0  # samples it was built from (0: read as a table)
    mean: float | None = None  # of the samples, in their unit: the profile's delay
    sigma: float | None = None  # of the samples, in their unit: the profile's jitter
    clamped: int = 0  # cells clamped to +/-32767 (samples beyond 4 sigma)

    def describe(self) -> str:
        """One line: where from, and the shape in sigma units."""
        if self.samples:
            how = (f"built from {self.samples} samples (mean {self.mean:g}, sigma {self.sigma:g} in their unit)"
                   + (f", {self.clamped} cells clamped at +/-4 sigma" if self.clamped else ""))
        elif self.entries != TABLE_LEN:
            how = f"{self.entries} entries tiled to {TABLE_LEN}"
        else:
            how = f"{TABLE_LEN} entries"
        return f"{self.source}: {how}"


def check_table(values: Iterable[int], source: str = "distribution table") -> tuple[int, ...]:
    """TABLE_LEN integers in the int16 range, as a tuple; ProfileError naming each bad cell."""
    cells = list(values)
    problems = []
    if len(cells) != TABLE_LEN:
        problems.append(Problem("", f"{len(cells)} cells; the switch's table has exactly {TABLE_LEN}"))
    for i, v in enumerate(cells):
        if isinstance(v, bool) or not isinstance(v, int):
            problems.append(Problem(f"[{i}]", f"{quote(v)} is not an integer"))
        elif not INT16_MIN <= v <= INT16_MAX:
            problems.append(Problem(f"[{i}]", f"{v} is outside {INT16_MIN}..{INT16_MAX} (int16, sigma/{DIST_SCALE})"))
    if problems:
        raise ProfileError(_capped(problems), source)
    return tuple(cells)


def _capped(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= _MAX_PROBLEMS:
        return problems
    return problems[:_MAX_PROBLEMS] + [Problem("", f"... and {len(problems) - _MAX_PROBLEMS} more")]


def _words(text: str) -> Iterable[tuple[int, str]]:
    """(line number, word) of every word outside `#` comments."""
    for number, line in enumerate(text.splitlines(), start=1):
        for word in line.split("#", 1)[0].split():
            yield number, word


def parse_dist(text: str, source: str = "distribution table") -> DistTable:
    """A netem `.dist` table (see the module docstring). ProfileError naming the line and value of
    every entry that is not an integer or not in the int16 range, or the count when it is not
    4096 or a power of two below it."""
    entries: list[int] = []
    problems: list[Problem] = []
    for number, word in _words(text):
        if _C_INT.fullmatch(word) is None:
            problems.append(Problem(f"line {number}", f"{quote(word)} is not an integer (a .dist file holds "
                                                      "integers in sigma/8192 units)"))
            continue
        value = int(word, 8) if _OCTAL.fullmatch(word) else int(word, 0)
        if not INT16_MIN <= value <= INT16_MAX:
            problems.append(Problem(f"line {number}", f"{word} is outside {INT16_MIN}..{INT16_MAX} (a netem table "
                                                      f"entry is an int16: sigma/{DIST_SCALE})"))
            continue
        entries.append(value)
    if problems:
        raise ProfileError(_capped(problems), source)
    n = len(entries)
    if n == 0:
        raise ProfileError([Problem("", "no entries (only comments or blank lines)")], source)
    if n > TABLE_LEN or TABLE_LEN % n:
        raise ProfileError([Problem("", (
            f"{n} entries: the switch's table has {TABLE_LEN} cells drawn uniformly, which holds a netem table of "
            f"{TABLE_LEN} entries (what maketable and iproute2's own tables have) or of a power of two below "
            f"{TABLE_LEN} (tiled: the same distribution); {n} would change the distribution. Rebuild it from the "
            "delay samples (p4netem distribution load --from-samples) or with maketable"))], source)
    return DistTable(values=tuple(entries[i % n] for i in range(TABLE_LEN)), source=source, entries=n)


def load_dist(path: str | Path) -> DistTable:
    """parse_dist of a file (OSError if it cannot be read)."""
    path = Path(path)
    return parse_dist(_read(path), str(path))


def parse_samples(text: str, source: str = "samples") -> list[float]:
    """Numbers separated by white space (`#` starts a comment), any one unit. ProfileError naming
    the line of every word that is not a finite number."""
    samples: list[float] = []
    problems: list[Problem] = []
    for number, word in _words(text):
        try:
            value = float(word)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            problems.append(Problem(f"line {number}", f"{quote(word)} is not a number (samples are plain numbers "
                                                      "in one unit, e.g. delays in ms)"))
            continue
        samples.append(value)
    if problems:
        raise ProfileError(_capped(problems), source)
    return samples


def table_from_samples(samples: Sequence[float], source: str = "samples") -> DistTable:
    """The standardised inverse CDF of `samples` (see the module docstring). ProfileError when
    there are fewer than 2 samples or they are all equal (no spread to standardise)."""
    import numpy as np

    x = np.asarray(samples, dtype=float)
    if x.size < 2:
        raise ProfileError([Problem("", f"{x.size} sample(s); at least 2 are needed (thousands for a good table)")],
                           source)
    mean = float(x.mean())
    sigma = float(x.std(ddof=1))
    if not sigma > 0:
        raise ProfileError([Problem("", f"every sample is {mean:g}: no spread, so no distribution "
                                        "(use a delay without jitter)")], source)
    probabilities = (np.arange(TABLE_LEN) + 0.5) / TABLE_LEN
    # Hazen's plotting position: the k-th smallest of n samples sits at probability (k - 0.5) / n,
    # the same midpoint convention as the cells' (i + 0.5) / 4096.
    z = np.quantile((x - mean) / sigma, probabilities, method="hazen")
    scaled = np.rint(z * DIST_SCALE)
    clamped = int(np.count_nonzero((scaled > INT16_MAX) | (scaled < -INT16_MAX)))
    cells = np.clip(scaled, -INT16_MAX, INT16_MAX).astype(int)
    return DistTable(values=tuple(int(v) for v in cells), source=source, entries=TABLE_LEN, samples=int(x.size),
                     mean=mean, sigma=sigma, clamped=clamped)


def load_samples(path: str | Path) -> DistTable:
    """table_from_samples of a file of numbers (OSError if it cannot be read)."""
    path = Path(path)
    return table_from_samples(parse_samples(_read(path), str(path)), str(path))


def format_dist(values: Sequence[int], comment: str = "") -> str:
    """A `.dist` file of `values`, eight per line, as iproute2 writes them (tc reads it back)."""
    lines = [f"# {line}" for line in comment.splitlines()]
    lines += [" ".join(str(v) for v in values[i:i + 8]) for i in range(0, len(values), 8)]
    return "\n".join(lines) + "\n"


# Where tc looks up `distribution NAME` (NAME.dist): $TC_LIB_DIR, else its LIBDIR/tc, which
# distributions put under their multiarch lib directory.
_TC_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/aarch64-linux-gnu/tc", "/usr/lib64/tc", "/usr/lib/tc",
                "/usr/share/tc")


def find_netem_dist(name: str) -> Path | None:
    """The table file netem's `distribution NAME` means: NAME itself when it is a path (has a `/`
    or ends in .dist), else NAME.dist in tc's library directory; None if there is none."""
    if "/" in name or name.endswith(".dist"):
        return Path(name)
    dirs = [os.environ["TC_LIB_DIR"]] if os.environ.get("TC_LIB_DIR") else list(_TC_LIB_DIRS)
    for d in dirs:
        candidate = Path(d) / f"{name}.dist"
        if candidate.is_file():
            return candidate
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError([Problem("", f"not a text file ({exc.reason} at byte {exc.start})")], str(path)) from None


def table_summary(values: Sequence[int]) -> dict:
    """The shape of a table in sigma units: mean, standard deviation, min, max and quantiles (the
    cells are equally likely, so the quantiles of the cells are the distribution's), and whether
    it is all zeros (the user table before a load: no jitter at all)."""
    cells = sorted(values)
    n = len(cells)
    if n == 0:
        return {"cells": 0, "all_zero": True}
    mean = sum(cells) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in cells) / n)

    def q(p: float) -> float:
        return round(cells[min(n - 1, int(p * n))] / DIST_SCALE, 3)

    return {"cells": n, "all_zero": not any(cells), "distinct": len(set(cells)),
            "mean": round(mean / DIST_SCALE, 3), "sd": round(sd / DIST_SCALE, 3),
            "min": round(cells[0] / DIST_SCALE, 3), "max": round(cells[-1] / DIST_SCALE, 3),
            "quantiles": {"p1": q(0.01), "p10": q(0.10), "p50": q(0.50), "p90": q(0.90), "p99": q(0.99)}}


def summary_line(values: Sequence[int]) -> str:
    """table_summary on one line, in sigma units."""
    s = table_summary(values)
    if s["all_zero"]:
        return "all zeros: jitter_distribution user adds no jitter until a table is loaded"
    qs = s["quantiles"]
    return (f"in sigma: mean {s['mean']:+.3f}, sd {s['sd']:.3f}, min {s['min']:+.3f}, p1 {qs['p1']:+.3f}, "
            f"p10 {qs['p10']:+.3f}, median {qs['p50']:+.3f}, p90 {qs['p90']:+.3f}, p99 {qs['p99']:+.3f}, "
            f"max {s['max']:+.3f} ({s['distinct']} distinct values)")
