"""Jitter distribution tables (p4netem.profiles.distribution): netem's .dist files, tables built
from delay samples the way iproute2's maketable builds them, and the errors of bad files."""

from __future__ import annotations

from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from p4netem.profiles import ProfileError
from p4netem.profiles.distribution import (DIST_SCALE, TABLE_LEN, check_table, find_netem_dist, format_dist,
                                           load_dist, load_samples, parse_dist, parse_samples,
                                           table_from_samples)

TC_NORMAL = find_netem_dist("normal")  # iproute2's own table (scripts/setup-system.sh installs iproute2)


def normal_reference() -> np.ndarray:
    """The standard normal quantiles at the cells' probabilities, in table units."""
    nd = NormalDist()
    z = np.array([nd.inv_cdf((i + 0.5) / TABLE_LEN) for i in range(TABLE_LEN)])
    return np.clip(np.rint(z * DIST_SCALE), -32767, 32767)


def test_a_4096_entry_table_is_read_as_is_with_comments_hex_and_octal() -> None:
    values = [(i * 37) % 65536 - 32768 for i in range(TABLE_LEN)]
    text = "# made by hand\n\n" + format_dist(values).replace("\n", "  # trailing comment\n", 1)
    table = parse_dist(text, "hand.dist")
    assert table.values == tuple(values) and table.entries == TABLE_LEN
    # tc reads entries with strtol(base 0): hex and (leading zero) octal are numbers too.
    tiled = parse_dist("0x10 -0x10 010 -8", "c.dist")
    assert tiled.values[:4] == (16, -16, 8, -8)


def test_a_power_of_two_table_is_tiled_as_netem_draws_it() -> None:
    table = parse_dist("-8192\n8192\n", "two.dist")
    assert table.entries == 2
    assert table.values == tuple(-8192 if i % 2 == 0 else 8192 for i in range(TABLE_LEN))
    assert parse_dist("8192").values == (8192,) * TABLE_LEN


@pytest.mark.parametrize("count", [3, 1000, 4095, 4097, 16384])
def test_other_entry_counts_are_refused_with_the_count(count: int) -> None:
    with pytest.raises(ProfileError) as exc:
        parse_dist(" ".join(["1"] * count), "odd.dist")
    message = str(exc.value)
    assert message.startswith(f"odd.dist: {count} entries") and "4096" in message and "--from-samples" in message


def test_bad_entries_are_named_by_line_with_the_allowed_range() -> None:
    text = "# header\n1 2 3\n4 five 6\n40000 -32769 -32768 32767\n"
    with pytest.raises(ProfileError) as exc:
        parse_dist(text, "bad.dist")
    problems = [str(p) for p in exc.value.problems]
    assert problems == [
        'line 3: "five" is not an integer (a .dist file holds integers in sigma/8192 units)',
        "line 4: 40000 is outside -32768..32767 (a netem table entry is an int16: sigma/8192)",
        "line 4: -32769 is outside -32768..32767 (a netem table entry is an int16: sigma/8192)",
    ]
    with pytest.raises(ProfileError, match="no entries"):
        parse_dist("# nothing\n\n", "empty.dist")


def test_many_bad_entries_are_listed_up_to_ten_then_counted() -> None:
    with pytest.raises(ProfileError) as exc:
        parse_dist("\n".join(["x"] * 25), "junk.dist")
    assert len(exc.value.problems) == 11 and str(exc.value.problems[-1]) == "... and 15 more"
    assert str(exc.value.problems[0]).startswith("line 1:")


@pytest.mark.skipif(TC_NORMAL is None, reason="iproute2's normal.dist not installed")
def test_iproute2s_normal_table_loads_and_is_the_normal_quantiles() -> None:
    table = load_dist(TC_NORMAL)
    assert table.entries == TABLE_LEN
    diff = np.abs(np.array(table.values) - normal_reference())
    # netem's table comes from a numeric integration (normal.c), ours from the quantile
    # function: the same curve to a few units of sigma/8192 except in the extreme tails.
    assert np.median(diff) <= 20 and np.percentile(diff, 98) <= 200, (np.median(diff), np.percentile(diff, 98))


def test_samples_from_a_normal_give_the_normal_table() -> None:
    rng = np.random.default_rng(2024)
    samples = rng.normal(50.0, 5.0, 200_000)
    table = table_from_samples(samples.tolist(), "normal samples")
    assert table.samples == 200_000 and abs(table.mean - 50.0) < 0.1 and abs(table.sigma - 5.0) < 0.1
    diff = np.abs(np.array(table.values) - normal_reference())
    inner = diff[TABLE_LEN // 100:-TABLE_LEN // 100]  # sampling noise grows in the tails
    assert np.median(diff) <= 0.01 * DIST_SCALE and inner.max() <= 0.05 * DIST_SCALE, (np.median(diff), inner.max())
    assert list(table.values) == sorted(table.values)  # an inverse CDF


def test_samples_are_standardised_whatever_their_unit_and_the_tails_clamped() -> None:
    # Two values, half each: standardised to -1 and +1 sigma (n-1 in the sigma: just under);
    # the few cells between the two halves are interpolated, as maketable interpolates its gaps.
    table = table_from_samples([10.0, 30.0] * 500, "two values")
    assert table.values.count(-8188) >= 2040 and table.values.count(8188) >= 2040
    assert min(table.values) == -8188 and max(table.values) == 8188 and sum(table.values) == 0
    assert table.mean == 20.0 and abs(table.sigma - 10.005) < 0.001
    # One far outlier among 10000 equal-ish samples lies beyond 4 sigma: clamped, and said so.
    outlier = table_from_samples([0.0] * 5000 + [1.0] * 4999 + [10_000.0], "outlier")
    assert max(outlier.values) == 32767 and outlier.clamped >= 1
    assert "clamped" in outlier.describe()
    assert abs(sum(outlier.values)) / TABLE_LEN < DIST_SCALE  # the rest stays near the middle


def test_bad_samples_are_named_by_line() -> None:
    with pytest.raises(ProfileError) as exc:
        parse_samples("12.5 13\n14ms\nnan 1e3\n", "delays.txt")
    assert [str(p) for p in exc.value.problems] == [
        'line 2: "14ms" is not a number (samples are plain numbers in one unit, e.g. delays in ms)',
        'line 3: "nan" is not a number (samples are plain numbers in one unit, e.g. delays in ms)',
    ]
    with pytest.raises(ProfileError, match="at least 2"):
        table_from_samples([1.0], "one")
    with pytest.raises(ProfileError, match="no spread"):
        table_from_samples([5.0] * 10, "flat")


def test_files_round_trip_through_format_dist(tmp_path: Path) -> None:
    samples = tmp_path / "delays.txt"
    rng = np.random.default_rng(7)
    samples.write_text("# one-way delays, ms\n" + "\n".join(f"{v:.3f}" for v in rng.gamma(2.0, 3.0, 5000)))
    built = load_samples(samples)
    assert built.source == str(samples) and built.samples == 5000
    dist = tmp_path / "gamma.dist"
    dist.write_text(format_dist(built.values, "gamma\nfrom delays.txt"))
    assert load_dist(dist).values == built.values
    assert dist.read_text().startswith("# gamma\n# from delays.txt\n")


def test_check_table_names_bad_cells() -> None:
    assert check_table([0] * TABLE_LEN) == (0,) * TABLE_LEN
    with pytest.raises(ProfileError) as exc:
        check_table([0] * 10, "t")
    assert str(exc.value) == "t: 10 cells; the switch's table has exactly 4096"
    cells = [0] * TABLE_LEN
    cells[5], cells[9] = 32768, "1"
    with pytest.raises(ProfileError) as exc:
        check_table(cells, "t")
    assert [str(p) for p in exc.value.problems] == ["[5]: 32768 is outside -32768..32767 (int16, sigma/8192)",
                                                    '[9]: "1" is not an integer']


def test_find_netem_dist_takes_paths_and_tc_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_netem_dist("./mine.dist") == Path("./mine.dist")
    assert find_netem_dist("/x/y") == Path("/x/y")
    (tmp_path / "experimental.dist").write_text("0\n")
    monkeypatch.setenv("TC_LIB_DIR", str(tmp_path))
    assert find_netem_dist("experimental") == tmp_path / "experimental.dist"
    assert find_netem_dist("nosuch") is None


def test_show_table_names_are_checked_before_connecting_and_list_only_tables() -> None:
    """`distribution show --table bogus` connected first (with no switch: exit 3, UNAVAILABLE,
    after 5 s) and then said "allowed none, uniform, normal, ...", where `none` and `uniform` are
    refused as having no table. Now a usage problem named --table, listing the four tables."""
    import subprocess
    import sys

    from p4netem.control.distributions import table_distribution
    from p4netem.profiles.link import JitterDistribution

    assert table_distribution(" Pareto ") is JitterDistribution.PARETO
    assert table_distribution(JitterDistribution.USER) is JitterDistribution.USER
    for bad, extra in (("bogus", ""), ("none", " (it has no table)"), ("Uniform", " (it has no table)")):
        with pytest.raises(ProfileError) as info:
            table_distribution(bad, "--table")
        assert str(info.value) == (f"--table: {bad!r} is not a distribution table; allowed normal, pareto, "
                                   f"paretonormal, user{extra}")
    p4netem = Path(sys.executable).parent / "p4netem"
    r = subprocess.run([str(p4netem), "distribution", "show", "--table", "uniform", "-s", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.startswith("error: --table: 'uniform' is not a distribution table"), r
