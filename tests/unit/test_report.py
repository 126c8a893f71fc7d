"""The report's statistics and claims, without a lab: the bootstrap intervals cover what they
claim to on distributions whose medians are known, are reproducible from their seed, and the
claims' verdicts follow the intervals (agrees / disagrees / inconclusive / mixed / not measured)
on rows made to land on each side. The lab test (tests/labs/test_lab_report.py) renders a real
run's report in Chromium."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from p4netem_studies.experiments.definition import ExperimentError
from p4netem_studies.report.bootstrap import (Interval, combined_ci, difference_ci, median_ci,
                                              ratio_ci, seed_for)
from p4netem_studies.report.claims import (AGREES, DISAGREES, INCONCLUSIVE, MIXED, NOT_MEASURED,
                                           Check, Claim, claims_for)
from p4netem_studies.report.estimates import Estimator
from p4netem_studies.report.reader import RunData, read_run_directory, typed


# ---- bootstrap ----------------------------------------------------------------------------------

def _coverage(draw, truth: float, ci, trials: int = 300, seed: int = 11) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for t in range(trials):
        iv = ci(draw(rng), t)
        hits += iv.low <= truth <= iv.high
    return hits / trials


@pytest.mark.parametrize("name,draw,truth", [
    ("normal", lambda rng: rng.normal(5.0, 2.0, 31), 5.0),
    ("exponential", lambda rng: rng.exponential(1.0, 41), math.log(2)),
    ("lognormal", lambda rng: rng.lognormal(0.3, 0.8, 31), math.exp(0.3)),
])
def test_median_interval_covers_the_true_median_at_its_confidence(name, draw, truth):
    cov95 = _coverage(draw, truth, lambda v, t: median_ci(v, seed=t, resamples=1000))
    assert 0.88 <= cov95 <= 0.995, f"{name}: 95% intervals covered {cov95:.2f}"
    # The coverage follows the confidence asked for: 50% intervals cover about half the time.
    cov50 = _coverage(draw, truth, lambda v, t: median_ci(v, seed=t, resamples=1000,
                                                          confidence=0.5))
    assert 0.35 <= cov50 <= 0.65, f"{name}: 50% intervals covered {cov50:.2f}"


def test_ratio_and_difference_intervals_cover_the_true_values():
    # Two log-normal conditions (page-load-time-like): true medians e^0.5 and e^0.1.
    def draw(rng):
        return rng.lognormal(0.5, 0.6, 25), rng.lognormal(0.1, 0.6, 25)
    ratio = _coverage(draw, math.exp(0.4),
                      lambda ab, t: ratio_ci(ab[0], ab[1], seed=t, resamples=1000))
    diff = _coverage(draw, math.exp(0.5) - math.exp(0.1),
                     lambda ab, t: difference_ci(ab[0], ab[1], seed=t, resamples=1000))
    assert 0.88 <= ratio <= 0.995 and 0.88 <= diff <= 0.995, (ratio, diff)


def test_intervals_are_seeded_and_reproducible():
    values = np.random.default_rng(3).exponential(2.0, 40)
    a = median_ci(values, seed=42)
    assert a == median_ci(list(values), seed=42)           # same values, same seed: same interval
    assert a.resamples == 2000 and a.confidence == 0.95 and a.n == (40,)
    assert a.low < a.estimate < a.high
    # The seed drives the resamples: with few resamples the interval's ends move with it (with
    # 2000 they are mostly the same order statistics of the data, whatever the seed).
    assert len({median_ci(values, seed=s, resamples=200) for s in range(5)}) > 1
    # seed_for: stable (not Python's salted hash), different per key and per report seed.
    assert seed_for(1, "e3", "a") == seed_for(1, "e3", "a") == 787144657
    assert len({seed_for(1, "e3", "a"), seed_for(1, "e3", "b"), seed_for(2, "e3", "a")}) == 3


def test_small_samples_have_no_interval_and_decide_nothing():
    one = median_ci([3.0])
    assert one.estimate == 3.0 and not one.has_interval and one.side_of(1.0) == 0
    assert not median_ci([]).has_interval and median_ci([]).estimate is None
    r = ratio_ci([2.0, 2.1, 2.2], [1.0])
    assert r.estimate == pytest.approx(2.1) and not r.has_interval and r.n == (3, 1)
    iv = Interval(1.5, 1.2, 1.8, (5, 5))
    assert (iv.side_of(1.0), iv.side_of(2.0), iv.side_of(1.5)) == (1, -1, 0)


def test_zero_denominators_are_left_out_of_a_ratio():
    iv = ratio_ci([4.0, 5.0, 6.0], [0.0, 0.0, 2.0, 2.0, 2.0], seed=1)
    assert iv.has_interval and math.isfinite(iv.high) and iv.estimate == pytest.approx(2.5)


def test_clustered_samples_carry_the_spread_between_runs():
    # Three runs whose levels differ: resampling the runs widens the interval over treating
    # every page as independent; one run says in its note that the run-to-run spread is out.
    rng = np.random.default_rng(5)
    runs = [list(rng.normal(level, 0.1, 30)) for level in (1.0, 1.5, 2.0)]
    clustered = median_ci(clusters=runs, seed=1)
    flat = median_ci([v for r in runs for v in r], seed=1)
    assert (clustered.high - clustered.low) > 2 * (flat.high - flat.low)
    assert not clustered.note
    assert "one run" in median_ci(clusters=runs[:1], seed=1).note


def test_combined_statistic_of_four_samples():
    a, b, c, d = [10.0] * 5, [5.0] * 5, [10.0] * 5, [8.0] * 5
    iv = combined_ci(lambda a, b, c, d: (a / b) / (c / d), [a, b, c, d], seed=1)
    assert iv.estimate == pytest.approx(1.6) and iv.low == pytest.approx(1.6)


# ---- claims -------------------------------------------------------------------------------------

def _run(analysis: str, tables: dict, options: dict | None = None, tmp_path=None) -> RunData:
    exp = {"experiment": f"{analysis}-test", "variant": "quick",
           "definition": {"analysis": analysis, "options": options or {}}}
    return RunData(tmp_path, exp, {}, tables=tables)


def _e1_rows(net: str, client: str, times: list[float], packets: int, mode: str = "-") -> list:
    return [{"profile_label": net, "page": "microscape", "client": client, "mode": mode,
             "initcwnd": 10, "plt_ms": t, "packets": packets + i, "ip_bytes": 200_000,
             "header_overhead_pct": 14.0 if client == "http1.0" else 6.0}
            for i, t in enumerate(times)]


def test_check_verdicts_follow_the_interval():
    above, below, spans = (Interval(2.0, 1.5, 2.5, (5, 5)), Interval(0.5, 0.4, 0.6, (5, 5)),
                           Interval(1.0, 0.8, 1.2, (5, 5)))
    assert [Check("s", iv, ">", 1.0).verdict for iv in (above, below, spans)] == \
        [AGREES, DISAGREES, INCONCLUSIVE]
    assert [Check("s", iv, "<", 1.0).verdict for iv in (above, below, spans)] == \
        [DISAGREES, AGREES, INCONCLUSIVE]
    assert "spans 1" in Check("s", spans, ">", 1.0).why
    assert "no interval" in Check("s", Interval(2.0, None, None, (1, 1)), ">", 1.0).why


def test_claim_verdict_over_subjects():
    def claim(*ivs, op=">"):
        c = Claim("e0", "claim", "src", "stat", op, 1.0)
        c.checks = [Check(str(i), iv, op, 1.0) for i, iv in enumerate(ivs)]
        return c
    up, down, spans = (Interval(2.0, 1.5, 2.5, (5, 5)), Interval(0.5, 0.4, 0.6, (5, 5)),
                       Interval(1.0, 0.8, 1.2, (5, 5)))
    assert claim().verdict == NOT_MEASURED
    assert claim(up, up, spans).verdict == AGREES
    assert claim(down, spans).verdict == DISAGREES
    assert claim(up, down).verdict == MIXED
    assert claim(spans, spans).verdict == INCONCLUSIVE
    assert claim(up, spans).summary == "2 subjects: 1 agrees, 1 inconclusive"
    # "Both ways" (E3's mixed results): agrees only when subjects fall on both sides.
    assert claim(up, down, op="<>").verdict == AGREES
    assert claim(up, up, op="<>").verdict == DISAGREES
    assert claim(up, spans, op="<>").verdict == INCONCLUSIVE


def test_e1_claims_on_rows_that_agree_disagree_and_overlap(tmp_path):
    rows = (_e1_rows("wan", "http1.0", [2000, 2100, 2050, 1990, 2020], 640)
            + _e1_rows("wan", "pipelined", [540, 560, 550, 545, 552], 230)
            # On the "slow" network pipelining loses, on "same" the loads overlap.
            + _e1_rows("slow", "http1.0", [500, 510, 505, 495, 502], 640)
            + _e1_rows("slow", "pipelined", [900, 950, 920, 910, 930], 230)
            + _e1_rows("same", "http1.0", [500, 700, 600, 550, 650], 640)
            + _e1_rows("same", "pipelined", [520, 680, 610, 560, 640], 230))
    claims = claims_for(_run("e1", {"e1-runs": rows}, tmp_path=tmp_path))
    faster = claims[0]
    assert faster.claim.startswith("Pipelined HTTP/1.1 loads the page faster")
    assert {c.subject: c.verdict for c in faster.checks} == {
        "wan, IW 10": AGREES, "slow, IW 10": DISAGREES, "same, IW 10": INCONCLUSIVE}
    assert faster.verdict == MIXED
    wan = next(c for c in faster.checks if c.subject == "wan, IW 10")
    assert wan.interval.estimate == pytest.approx(2020 / 550)
    assert claims[1].verdict == AGREES                     # fewer packets everywhere
    assert claims[3].verdict == AGREES                     # 14% vs 6% header overhead
    # No serialized HTTP/1.1 client, no deflate, no modem GET in these rows.
    assert [c.verdict for c in (claims[2], claims[4], claims[5])] == [NOT_MEASURED] * 3


def test_e3_claims_mixed_results_and_loss(tmp_path):
    def rows(prof, loss, page, client, iw, times):
        return [{"profile_label": prof, "page": page, "client": client, "initcwnd": iw,
                 "plt_ms": t, "f_down_mbit": 10.0, "f_up_mbit": 1.0, "f_rtt_ms": 100.0,
                 "f_loss_pct": loss} for t in times]
    base = [2700, 2710, 2690, 2705]
    data = (rows("c0", 0.0, "a", "https", 3, base) + rows("c0", 0.0, "a", "h2", 3,
                                                          [1200, 1210, 1190, 1205])
            + rows("c0", 0.0, "b", "https", 3, base) + rows("c0", 0.0, "b", "h2", 3,
                                                            [4500, 4550, 4520, 4490])
            + rows("c1", 1.0, "a", "https", 3, base) + rows("c1", 1.0, "a", "h2", 3,
                                                            [2600, 2650, 2620, 2610]))
    run = _run("e3", {"e3-runs": data}, {"baseline": {"client": "https", "initcwnd": 3}},
               tmp_path=tmp_path)
    mixed, loss = claims_for(run)
    assert {c.subject: c.verdict for c in mixed.checks} == {
        "c0, a, h2 IW 3": "above", "c0, b, h2 IW 3": "below", "c1, a, h2 IW 3": "above"}
    assert mixed.verdict == AGREES
    # Page a: gain 2.25 without loss, 1.03 with 1% loss: the loss cut the gain.
    [check] = loss.checks
    assert check.subject == "a, h2 IW 3: c0 vs 1% loss"
    assert check.interval.estimate == pytest.approx((2702.5 / 1202.5) / (2702.5 / 2615))
    assert loss.verdict == AGREES


def test_e2_claims_compare_iw1_with_the_largest_window(tmp_path):
    runs, pages = [], []
    for http in ("1.0", "1.1"):
        for iw, delay, drops, util in ((1, 1200.0, 4.0, 0.70), (4, 900.0, 7.0, 0.72)):
            key = f"w16-b0-http{http}-iw{iw}"
            for rep in (0, 1):
                runs.append({"key": key, "http": http, "web_clients": 16, "bulk_clients": 0,
                             "initcwnd": iw, "initcwnd_label": str(iw), "rep": rep, "ok": True,
                             "drop_rate_down_pct": drops + rep * 0.2,
                             "utilisation_down": util + rep * 0.01})
                pages += [{"key": key, "rep": rep, "delay_ms": delay * (0.8 + 0.01 * i),
                           "ok": True, "in_window": True} for i in range(40)]
    delay, drops, util = claims_for(_run("e2", {"runs": runs, "pages": pages},
                                         tmp_path=tmp_path))
    assert [c.subject for c in delay.checks] == ["HTTP/1.0, 16 web, 0 bulk, IW 1 vs 4",
                                                 "HTTP/1.1, 16 web, 0 bulk, IW 1 vs 4"]
    assert delay.verdict == AGREES and drops.verdict == AGREES and util.verdict == AGREES
    assert delay.checks[0].interval.estimate == pytest.approx(1200 / 900)


def test_e4_and_e5_claims_pick_their_subjects(tmp_path):
    e4 = []
    for loss, (b, m) in ((0.0, (300.0, 150.0)), (2.0, (840.0, 1140.0))):
        for client, t, retx in (("http1.1", b, 2.0), ("h2", m, 7.0)):
            e4 += [{"f_rtt_ms": 20.0, "f_down_mbit": 10.0, "f_loss_pct": loss, "initcwnd": 10,
                    "f_embedded_objects": 64, "f_object_size": 1000, "client": client,
                    "plt_ms": t + i, "retransmissions_per_connection": retx + i * 0.1}
                   for i in range(3)]
    small, lossy, retx, tree = claims_for(_run("e4", {"e4-runs": e4}, tmp_path=tmp_path))
    assert [len(small.checks), len(lossy.checks), len(retx.checks)] == [1, 1, 1]
    assert small.verdict == AGREES and lossy.verdict == AGREES and retx.verdict == AGREES
    assert tree.verdict == NOT_MEASURED                    # no e4-cells.csv in these files

    # Cells whose label follows the object size alone: the refit trees rank it first and give
    # the initial window nothing, whatever the resample; when the label follows the IW alone,
    # the claim fails.
    def cells(label_of):
        return [{"f_rtt_ms": rtt, "f_down_mbit": bw, "f_loss_pct": 0.0, "initcwnd": iw,
                 "f_object_size": size, "f_embedded_objects": 8, "label": label_of(size, iw)}
                for rtt in (20.0, 200.0) for bw in (1.0, 10.0) for iw in (3, 10)
                for size in (100, 1000, 10000, 100000)]
    by_size = claims_for(_run("e4", {"e4-runs": [], "e4-cells": cells(
        lambda size, iw: "helps" if size <= 1000 else "hurts")}, tmp_path=tmp_path))[3]
    assert by_size.verdict == AGREES and by_size.checks[0].subject == "32 labelled cells"
    by_iw = claims_for(_run("e4", {"e4-runs": [], "e4-cells": cells(
        lambda size, iw: "helps" if iw == 10 else "hurts")}, tmp_path=tmp_path))[3]
    assert by_iw.verdict == DISAGREES

    e5 = []
    for net, synack, plt in (("hspa+radio", 1900.0, 2900.0), ("hspa+prewoken", 104.0, 1140.0),
                             ("lte+radio", 125.0, 340.0)):
        e5 += [{"network": net, "page": "s3", "client": "h2", "initcwnd": 10, "tls_label": "TLS",
                "first_syn_to_synack_ms": synack + i, "plt_ms": plt + i,
                "f_rtt_ms": 25.0 if net.startswith("lte") else 100.0} for i in range(3)]
    wake, prewake, lte, gprs = claims_for(_run("e5", {"e5-runs": e5}, tmp_path=tmp_path))
    assert wake.verdict == AGREES and prewake.verdict == AGREES and lte.verdict == AGREES
    assert lte.checks[0].interval.estimate == pytest.approx(101.0)      # 126 - 25 ms RTT
    assert gprs.verdict == NOT_MEASURED


# ---- reader -------------------------------------------------------------------------------------

def test_csv_cells_come_back_typed():
    assert [typed("x", v) for v in ("", "True", "False", "12", "-3", "1.5", "2e3", "a b")] == \
        [None, True, False, 12, -3, 1.5, 2000.0, "a b"]
    assert typed("http", "1.0") == "1.0" and typed("initcwnd_label", "4") == "4"


def test_reader_names_what_is_missing(tmp_path):
    with pytest.raises(ExperimentError, match="experiment.json missing"):
        read_run_directory(tmp_path)
    (tmp_path / "experiment.json").write_text(json.dumps(
        {"experiment": "e3-spdy", "definition": {"analysis": "e3"}}))
    with pytest.raises(ExperimentError, match=r"no e3-runs\.csv .*experiment analyze"):
        read_run_directory(tmp_path)
    (tmp_path / "e3-runs.csv").write_text("profile_label,page,client,initcwnd,plt_ms\n"
                                          "c,a,https,3,2700.5\n")
    data = read_run_directory(tmp_path)
    assert data.analysis == "e3" and data.rows("e3-runs") == [
        {"profile_label": "c", "page": "a", "client": "https", "initcwnd": 3, "plt_ms": 2700.5}]
    # Rows without a column a claim needs: named, not a traceback.
    (tmp_path / "e3-runs.csv").write_text("profile_label,page,initcwnd,plt_ms\nc,a,3,2700.5\n")
    with pytest.raises(ExperimentError, match="lack the column 'client'"):
        claims_for(read_run_directory(tmp_path))
    (tmp_path / "e3-runs.csv").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ExperimentError, match=r"e3-runs\.csv: unreadable"):
        read_run_directory(tmp_path)


def test_estimator_seeds_each_interval_from_its_key():
    est = Estimator(seed=1, resamples=500)
    from p4netem_studies.report.estimates import Sample
    s = Sample(tuple(float(v) ** 1.5 for v in range(20)))
    assert est.median(s, ("a",)) == est.median(s, ("a",))
    assert len({est.median(s, (k,)) for k in "abcde"}) > 1


# ---- the page -----------------------------------------------------------------------------------

def test_page_is_self_contained_and_escapes_what_it_shows(tmp_path):
    import re

    from p4netem_studies.report.html import MAX_PLOTTED_CHECKS, render
    plt = __import__("p4netem_studies.experiments.analysis.plots",
                     fromlist=["pyplot"]).pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    fig.savefig(tmp_path / "e1.png")
    plt.close(fig)
    rows = []
    for net in range(MAX_PLOTTED_CHECKS + 5):      # more subjects than one plot shows
        rows += _e1_rows(f"net{net}", "http1.0", [2000, 2100, 2050], 640)
        rows += _e1_rows(f"net{net}", "pipelined", [540, 560, 550], 230)
    runs = [{"key": "<b>k</b>", "rep": 0, "ok": False, "errors": "timeout <script>"}]
    data = _run("e1", {"e1-runs": rows, "runs": runs}, tmp_path=tmp_path)
    data.plots["e1"] = tmp_path / "e1.png"
    html = render(data, resamples=200)
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html)
    # The study plot and a forest plot per claim these rows test (time, packets, overhead).
    assert len(refs) == 1 + 3 and all(r.startswith("data:image/") for r in refs)
    assert "<script" not in html and "timeout &lt;script&gt;" in html and "&lt;b&gt;k" in html
    assert f"first {MAX_PLOTTED_CHECKS} of {MAX_PLOTTED_CHECKS + 5} subjects" in html
    assert html.count('class="verdict ok">agrees</span>') >= 2 * (MAX_PLOTTED_CHECKS + 5)
    assert html == render(data, resamples=200)                  # seeded: the same page again


def test_report_command_errors_are_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    p4netem = str(Path(sys.executable).parent / "p4netem")
    bad = subprocess.run([p4netem, "experiment", "report", str(tmp_path)], capture_output=True,
                         text=True, timeout=120, env={"COLUMNS": "60", "PATH": "/usr/bin:/bin"})
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        f"error: {tmp_path}: not an experiment's result directory (experiment.json missing)"]
    usage = subprocess.run([p4netem, "experiment", "report", str(tmp_path), "--resamples", "5"],
                           capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "--resamples" in usage.stderr and "200" in usage.stderr


def test_report_of_empty_tables_warns_that_nothing_was_checked(tmp_path):
    # An e5 run whose e5-runs.csv is empty (truncated): every claim is "not measured", which a
    # quick slice never gives; the report says so on stderr instead of exiting 0 in silence.
    import json
    import subprocess
    import sys
    from pathlib import Path
    (tmp_path / "experiment.json").write_text(json.dumps({"definition": {"analysis": "e5", "name": "e5-cellular"}}))
    (tmp_path / "e5-runs.csv").write_text("")
    p4netem = str(Path(sys.executable).parent / "p4netem")
    r = subprocess.run([p4netem, "experiment", "report", str(tmp_path), "--resamples", "200"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "warning: no claim could be checked" in r.stderr and "experiment analyze" in r.stderr, r.stderr


def test_report_of_a_slice_no_claim_compares_says_so_not_that_the_csvs_are_cut(tmp_path):
    # `experiment run e3-spdy --quick --only initcwnd=10`: complete tables, but E3's claims
    # compare each client with HTTPS at IW 3, which the slice left out. The warning blamed
    # "empty or truncated CSVs" and sent the user to `experiment analyze`, which changes nothing.
    import csv
    import json
    import subprocess
    import sys
    from pathlib import Path
    (tmp_path / "experiment.json").write_text(json.dumps({
        "experiment": "e3-spdy", "definition": {"analysis": "e3", "name": "e3-spdy"},
        "overrides": {"only": {"initcwnd": ["10"]}}}))
    cols = ["client", "initcwnd", "page", "profile_label", "plt_ms", "ok", "f_down_mbit",
            "f_up_mbit", "f_rtt_ms", "f_loss_pct"]
    with open(tmp_path / "e3-runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for client, plt in (("https", 2600), ("spdy", 2000), ("h2", 1200)):
            w.writerow([client, 10, "e3-a-1s", "e3-10m-1m-rtt100ms-loss0", plt, True, 10, 1, 100, 0])
    p4netem = str(Path(sys.executable).parent / "p4netem")
    r = subprocess.run([p4netem, "experiment", "report", str(tmp_path), "--resamples", "200"],
                       capture_output=True, text=True, timeout=120, env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "no claim could be checked" in r.stderr and "truncated" not in r.stderr, r.stderr
    assert "--only initcwnd=10" in r.stderr and "experiment show e3-spdy" in r.stderr, r.stderr
