"""Subsets of a matrix too large to run whole (E4's sweep has 3360 cells), reproducible by seed.

A *cell* is one combination of factor levels (e.g. RTT, rate, loss, IW, object size, count); the
clients being compared all run in every chosen cell, so each comparison stays paired.

- random: `size` cells drawn without replacement.
- stratified: every level of every factor appears about equally often (within one), like a
  Latin hypercube over the factors: for each factor the chosen cells cycle through its levels in
  a shuffled order, and the combinations are formed by independent shuffles. A combination that
  repeats is redrawn, so no cell is chosen twice. With `size` at least the number of levels of
  every factor, each level is represented; no factor is left to chance, which a random subset
  of a few hundred cells of a 3360-cell matrix does not guarantee.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence


def random_cells(cells: Sequence[Hashable], size: int, seed: int) -> list:
    if size >= len(cells):
        return list(cells)
    rng = random.Random(f"random/{seed}")
    chosen = set(rng.sample(range(len(cells)), size))
    return [c for i, c in enumerate(cells) if i in chosen]


def stratified_cells(levels: dict[str, Sequence], size: int, seed: int,
                     max_tries: int = 1000) -> list[dict]:
    """`size` distinct combinations of `levels` (factor -> its levels), each factor's levels
    used in balanced numbers. Returns dicts factor -> level, in a stable order."""
    total = 1
    for v in levels.values():
        total *= len(v)
    if total == 0:
        return []
    rng = random.Random(f"stratified/{seed}")
    names = list(levels)
    if size >= total:
        import itertools
        return [dict(zip(names, combo)) for combo in itertools.product(*levels.values())]
    columns: dict[str, list] = {}
    for name in names:
        lv = list(levels[name])
        col = (lv * (size // len(lv) + 1))[:size]
        rng.shuffle(col)
        columns[name] = col
    chosen: list[dict] = []
    seen: set[tuple] = set()
    for i in range(size):
        combo = tuple(columns[n][i] for n in names)
        tries = 0
        # A repeated combination: swap one factor's level with a later row's until it is new
        # (keeps every column's level counts, so the balance stays exact); the last row, with
        # no later row to swap with, takes another level (a count then differs by one).
        while combo in seen and tries < max_tries:
            n = names[rng.randrange(len(names))]
            if i + 1 < size:
                j = rng.randrange(i + 1, size)
                columns[n][i], columns[n][j] = columns[n][j], columns[n][i]
            else:
                columns[n][i] = rng.choice(list(levels[n]))
            combo = tuple(columns[n2][i] for n2 in names)
            tries += 1
        if combo in seen:
            raise RuntimeError(f"could not draw {size} distinct cells out of {total}")
        seen.add(combo)
        chosen.append(dict(zip(names, combo)))
    return chosen
