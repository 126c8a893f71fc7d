"""The experiment definitions (experiments/*.yaml) and the parts of the experiments package that
need no lab: each study's definition loads, its full variant is the study's matrix, its quick
variant is small; generated channels, sampling, filters, the workload's arithmetic and the
analyses' own computations (gains, the decision tree)."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest
import yaml

from p4netem_studies.experiments import ExperimentError, experiment_names, load_experiment
from p4netem_studies.experiments.definition import loader_args
from p4netem_studies.experiments.pageload import build_plan
from p4netem_studies.experiments.sampling import stratified_cells
from p4netem_studies.experiments.workload import build_workload_plan
from p4netem_studies.harness.plan import resolve_profile
from p4netem_studies.harness.workload import SizeModel, WorkloadCondition, run_metrics
from p4netem.pipeline import DOWNLINK, UPLINK, DropReason, pd_index
from p4netem.stats import PdCounters

QUICK_MAX_LOADS = 60          # page loads of a quick variant (each a few seconds)
QUICK_MAX_WORKLOAD_S = 300    # seconds of traffic of a quick workload variant


def test_every_study_has_a_definition():
    assert experiment_names() == ["e1-microscape", "e2-initial-window", "e3-spdy",
                                  "e4-multiplexing", "e5-cellular"]
    # Short names find them too.
    assert load_experiment("e3").name == "e3-spdy"


def _quick_is_small(name: str) -> None:
    q = build_plan(load_experiment(name, quick=True))
    assert q.plan.total_loads <= QUICK_MAX_LOADS, q.plan.total_loads
    full = build_plan(load_experiment(name))
    # The quick conditions are conditions of the full study (a slice, not something else)...
    assert {c.key for c in q.plan.conditions} <= {c.key for c in full.plan.conditions}
    # ...and it compares more than one client.
    assert len({q.cells[c.key].client for c in q.plan.conditions}) >= 2


def test_e1_microscape():
    exp = load_experiment("e1-microscape")
    b = build_plan(exp)
    # 3 networks x 4 clients x (first-time, revalidation) x IW 2/10, the same on the WAN over
    # a T3 and a T1 (the bottleneck-rate axis), plus the HTML GET plain and deflated over the
    # modem at both IWs.
    assert b.conditions == 3 * 4 * 2 * 2 + 2 * 4 * 2 * 2 + 2 * 2
    assert exp.options["wan_rates"] == ["wan-90ms", "wan-90ms-t3", "wan-90ms-t1"]
    for name, rate, queue in (("wan-90ms-t3", 44_736_000, 332), ("wan-90ms-t1", 1_544_000, 25)):
        p = resolve_profile(name)
        assert (int(p.downlink.rate), int(p.uplink.rate)) == (rate, rate)
        assert int(p.downlink.delay) + int(p.uplink.delay) == 90_000_000     # the study's RTT
        assert int(p.downlink.queue.packets) == queue
    # Every client, test and IW of the unlimited WAN runs at the two rates too.
    wan = {k.replace("wan-90ms |", "") for k in (c.key for c in b.plan.conditions)
           if k.startswith("wan-90ms |")}
    for name in ("wan-90ms-t3", "wan-90ms-t1"):
        assert {k.replace(f"{name} |", "") for k in (c.key for c in b.plan.conditions)
                if k.startswith(f"{name} |")} == wan and len(wan) == 16
    assert b.plan.repetitions == 5 and b.plan.gzip and b.plan.topology == "inline"
    conds = {c.key: c for c in b.plan.conditions}
    reval = conds["wan-90ms | pipelined reval iw10 plain buffered | microscape"]
    assert "--revalidate" in reval.loader_args and reval.protocol == "h1.1-pipelined"
    assert reval.loader_args[reval.loader_args.index("--flush-bytes") + 1] == "1024"
    plain = conds["lan-10mbit | http1.0 iw2 plain buffered | microscape"]
    assert plain.conns_per_host == 4 and ("--accept-encoding", "identity") == plain.loader_args[:2]
    deflate = conds["modem-28k8 | get+deflate iw10 plain buffered | microscape-html"]
    assert "identity" not in deflate.loader_args
    assert not any(c.tls for c in b.plan.conditions)          # 1997: no TLS
    # The study's servers buffered responses to pipelined requests: every client is served so.
    assert all(c.server_buffering for c in b.plan.conditions)
    lan = resolve_profile("lan-10mbit")                         # the experiment's own profile
    assert int(lan.downlink.rate) == 10_000_000 and int(lan.downlink.delay) == 250_000
    _quick_is_small("e1-microscape")


def test_e2_initial_window():
    exp = load_experiment("e2-initial-window")
    p = build_workload_plan(exp)
    assert len(p.conditions) == 3 * 4 * 2 * 5                  # clients x bulk x HTTP x IW
    assert p.duration_s == 360 and p.topology == "dumbbell"
    assert p.window_clamp == 11 * 1460
    assert {c.initcwnd_label for c in p.conditions} == {"1", "2", "3", "4", "1/3"}
    t1 = resolve_profile(p.profile)
    assert int(t1.downlink.queue.packets) == 25 and int(t1.downlink.delay) == 50_000_000
    # Every host's own 10 Mbit/s access link (the dumbbell is routed: topology.py).
    access = resolve_profile(p.access_profile)
    assert (int(access.downlink.rate), int(access.uplink.rate)) == (10_000_000, 10_000_000)
    assert int(access.downlink.delay) == 0
    q = build_workload_plan(load_experiment("e2-initial-window", quick=True))
    assert q.total_runs * (q.duration_s + q.warmup_s) <= QUICK_MAX_WORKLOAD_S
    assert len({c.initcwnd for c in q.conditions}) >= 2        # still compares windows


def test_e3_spdy():
    b = build_plan(load_experiment("e3-spdy"))
    # 8 channels x 9 pages (A/B/C on 1/2/4 servers) x 3 clients x IW 3/10.
    assert b.conditions == 8 * 9 * 3 * 2 and b.plan.repetitions == 20
    assert b.plan.topology_params == {"servers": 4} and all(c.tls for c in b.plan.conditions)
    chans = {c.profile for c in b.plan.conditions}
    assert len(chans) == 8
    p = resolve_profile("e3-20m-2m-rtt100ms-loss1")
    assert int(p.downlink.rate) == 20_000_000 and int(p.uplink.rate) == 2_000_000
    assert int(p.uplink.delay) == int(p.downlink.delay) == 50_000_000
    assert float(p.uplink.loss) == float(p.downlink.loss) == 1.0
    assert int(p.downlink.queue.packets) == int(p.uplink.queue.packets) == 50
    _quick_is_small("e3-spdy")


def test_e4_multiplexing_full_matrix_and_sample():
    exp = load_experiment("e4-multiplexing")
    b = build_plan(exp)
    assert b.matrix_cells == 3 * 2 * 4 * 4 * 5 * 7 and not b.sampled
    assert b.conditions == 2 * b.matrix_cells and b.plan.repetitions >= 6
    assert all("--discover" in c.loader_args for c in b.plan.conditions[:50])
    # The 512 x 1 MB pages at 1 Mbit/s raise the timeout beyond the definition's.
    assert b.plan.timeout_s > 3 * 512e6 * 8 / 1e6
    # A stratified sample: every level of every factor about equally often, both clients in
    # every chosen cell, reproducible by seed.
    from p4netem_studies.experiments.run import prepare
    s1 = build_plan(prepare("e4-multiplexing", quick=False, sample=100, seed=3))
    s2 = build_plan(prepare("e4-multiplexing", quick=False, sample=100, seed=3))
    s3 = build_plan(prepare("e4-multiplexing", quick=False, sample=100, seed=4))
    assert s1.conditions == 200 and s1.sampled
    assert [c.key for c in s1.plan.conditions] == [c.key for c in s2.plan.conditions]
    assert [c.key for c in s1.plan.conditions] != [c.key for c in s3.plan.conditions]
    cells = [s1.cells[c.key] for c in s1.plan.conditions]
    for factor, levels in (("rtt_ms", 3), ("loss_pct", 4), ("embedded_objects", 7)):
        counts = Counter(c.factors[factor] for c in cells)
        assert len(counts) == levels and max(counts.values()) - min(counts.values()) <= 2 * 2
    per_cell = Counter((c.profile, c.page, c.initcwnd) for c in cells)
    assert set(per_cell.values()) == {2}
    _quick_is_small("e4-multiplexing")


def test_e5_cellular():
    b = build_plan(load_experiment("e5-cellular"))
    conds = b.plan.conditions
    # 4 networks x 8 sites x 3 clients x IW 3/10 x TLS off/on, the same for HSPA pre-woken,
    # and the browser on HSPA and LTE.
    assert len(conds) == 4 * 8 * 3 * 2 * 2 + 8 * 3 * 2 * 2 + 2 * 8 * 2
    assert all(c.radio for c in conds)                         # the radio is on everywhere
    prewoken = [c for c in conds if c.prewake]
    assert len(prewoken) == 8 * 3 * 2 * 2 and {c.profile_label for c in prewoken} == {
        "hspa+prewoken"}
    # Pre-waking is the harness's (idle, then wake): not a loader option, not in the label.
    assert not any(c.loader_args for c in prewoken) and {c.label for c in prewoken} == {
        "http", "spdy", "h2"}
    assert {c.profile for c in conds} == {"gprs", "hspa", "lte", "lte-200ms"}
    assert {c.tls for c in conds if c.protocol == "h2"} == {True, False}
    _quick_is_small("e5-cellular")


def test_loader_args_of_client_options():
    assert loader_args({"accept_encoding": "identity", "revalidate": True,
                        "discover": "at-once", "prewake": True, "flush_bytes": 1024,
                        "flush_ms": 50.0}) == (
        "--accept-encoding", "identity", "--revalidate", "--discover", "at-once",
        "--flush-bytes", "1024", "--flush-ms", "50.0")
    assert loader_args({"revalidate": False, "prewake": None}) == ()


def test_only_filters_conditions():
    exp = load_experiment("e1-microscape", quick=True)
    b = build_plan(exp, only={"profile": ["lan-10mbit"], "client": ["http1.0", "pipelined"]})
    assert {(b.cells[c.key].profile, b.cells[c.key].client) for c in b.plan.conditions} == {
        ("lan-10mbit", "http1.0"), ("lan-10mbit", "pipelined")}
    with pytest.raises(ValueError, match="--only takes"):
        build_plan(exp, only={"colour": ["red"]})
    with pytest.raises(ValueError, match="no condition left"):
        build_plan(exp, only={"profile": ["gprs"]})


def test_only_takes_the_prewoken_profile_name_the_conditions_show():
    # `experiment show` and the tables name E5's pre-woken loads 'hspa+prewoken'; the slice
    # docs/experiments.md runs (`--only profile=...,hspa+prewoken`) was refused as unknown.
    exp = load_experiment("e5-cellular", quick=True)
    only = build_plan(exp, only={"profile": ["hspa+prewoken"]}).plan.conditions
    assert only and all(c.prewake and c.profile_label == "hspa+prewoken" for c in only)
    both = build_plan(exp, only={"profile": ["hspa+radio"]}).plan.conditions
    assert {c.profile_label for c in both} == {"hspa+radio", "hspa+prewoken"}   # as before
    with pytest.raises(ValueError, match="profile is one of .*hspa\\+prewoken"):
        build_plan(exp, only={"profile": ["lte+prewoken", "lte+radio"]})


def _write(tmp: Path, doc: dict) -> Path:
    path = tmp / "x.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


BASE = {"name": "x", "title": "t", "reproduces": "r", "kind": "pageload", "analysis": "e3",
        "repetitions": 1, "clients": {"a": {"protocol": "h2"}},
        "matrix": [{"profiles": ["lan"], "pages": ["demo"], "clients": ["a"]}],
        "quick": {"repetitions": 1}}


def test_bad_definitions_name_the_field(tmp_path):
    bad = dict(BASE, matrix=[{"profiles": ["lan"], "pages": ["demo"], "clients": ["b"]}])
    with pytest.raises(ExperimentError, match=r"client 'b' is not defined"):
        load_experiment(_write(tmp_path, bad))
    bad = dict(BASE, clients={"a": {"protocol": "h3"}})
    with pytest.raises(ExperimentError, match=r"clients\.a\.protocol: unknown protocol 'h3'"):
        load_experiment(_write(tmp_path, bad))
    bad = dict(BASE, matrix=[{"channels": {"prefix": "z", "rate": ["fast"], "rtt": ["10ms"]},
                              "pages": ["demo"], "clients": ["a"]}])
    with pytest.raises(ExperimentError, match=r"matrix\.0\.channels\.rate"):
        load_experiment(_write(tmp_path, bad))
    bad = dict(BASE, matrix=[{"profiles": ["nowhere"], "pages": ["demo"], "clients": ["a"]}])
    with pytest.raises(ExperimentError, match="neither built-in nor defined"):
        load_experiment(_write(tmp_path, bad))
    # The quick variant is validated even when the full one is asked for.
    bad = dict(BASE, quick={"repetitions": 0})
    with pytest.raises(ExperimentError, match=r"(?s)\(quick\).*repetitions"):
        load_experiment(_write(tmp_path, bad))
    bad = dict(BASE, modes={"woken": {"prewake": True}},
               matrix=[{"profiles": ["hspa"], "pages": ["demo"], "clients": ["a"],
                        "modes": ["woken"]}])
    with pytest.raises(ExperimentError, match=r"pre-wakes the radio: every profile"):
        load_experiment(_write(tmp_path, bad))
    nq = {k: v for k, v in BASE.items() if k != "quick"}
    with pytest.raises(ExperimentError, match="needs a `quick:` variant"):
        load_experiment(_write(tmp_path, nq))
    with pytest.raises(ExperimentError, match="no experiment 'e9'"):
        load_experiment("e9")


def test_stratified_sampling_is_balanced_and_distinct():
    levels = {"a": [1, 2, 3], "b": ["x", "y"], "c": [10, 20, 30, 40]}
    cells = stratified_cells(levels, 12, seed=1)
    assert len({tuple(c.values()) for c in cells}) == 12
    for name, lv in levels.items():
        counts = Counter(c[name] for c in cells)
        assert set(counts) == set(lv) and max(counts.values()) - min(counts.values()) <= 1
    # Asking for more than there is gives the whole product.
    assert len(stratified_cells(levels, 100, seed=1)) == 24


def test_workload_sizes_and_windows():
    import random
    model = SizeModel("pareto", 1.2, 2920, 100, 1_000_000)
    rng = random.Random(5)
    sizes = [model.draw(rng) for _ in range(20000)]
    assert statistics.median(sizes) == pytest.approx(2920, rel=0.05)
    assert max(sizes) <= 1_000_000 and min(sizes) >= 100
    # Heavy tail: the mean is well above the median.
    assert statistics.fmean(sizes) > 2 * statistics.median(sizes)
    mix = WorkloadCondition(16, 0, "1.0", (1, 3))
    assert [mix.iw_of_host(i, 4) for i in range(4)] == [1, 1, 3, 3]
    assert mix.initcwnd_label == "1/3" and mix.key == "web16 bulk0 http1.0 iw1/3"
    with pytest.raises(ValueError):
        WorkloadCondition(0, 0, "1.0", (3,))


def _pd(pd, pkts_in, bytes_out, qdrops):
    return PdCounters(pd, pkts_in, pkts_in - qdrops, 0, 0, {DropReason.QUEUE_FULL: qdrops},
                      bytes_out=bytes_out)


def test_workload_run_metrics():
    exp = load_experiment("e2-initial-window", quick=True)
    plan = build_workload_plan(exp)
    cond = WorkloadCondition(4, 1, "1.0", (1, 3))
    start = 1000.0
    w0 = start + plan.warmup_s
    agents = [
        {"host": "client1", "pages": [
            {"t_start": w0 + 1, "t_end": w0 + 2, "ok": True, "delay_ms": 1000.0,
             "bytes": 10_000},
            {"t_start": w0 - 5, "t_end": w0 - 4, "ok": True, "delay_ms": 500.0,
             "bytes": 99_999}],                                   # before the window
         "bulk_bins": {}, "bulk_bin_s": 0.1},
        {"host": "client3", "pages": [
            {"t_start": w0 + 3, "t_end": w0 + 6, "ok": True, "delay_ms": 3000.0,
             "bytes": 20_000},
            {"t_start": w0 + 4, "t_end": None, "ok": None, "delay_ms": None, "bytes": 5}],
         "bulk_bins": {str(int((plan.warmup_s + 1) / 0.1)): 50_000, "0": 7}, "bulk_bin_s": 0.1},
    ]
    dn, up = pd_index(1, DOWNLINK), pd_index(1, UPLINK)
    c0 = {DOWNLINK: _pd(dn, 0, 0, 0), UPLINK: _pd(up, 0, 0, 0)}
    rate = {"down": 1_544_000.0, "up": 1_544_000.0}
    c1 = {DOWNLINK: _pd(dn, 1000, int(1_544_000 * plan.duration_s / 8 / 2), 20),
          UPLINK: _pd(up, 500, 0, 0)}
    m, pages = run_metrics(cond, plan, rate, start, agents, c0, c1,
                           {"client1": 1, "client3": 3})
    assert m["pages_started"] == 3 and m["pages_ok"] == 2 and m["pages_unfinished"] == 1
    assert m["page_delay_median_ms"] == pytest.approx(2000.0)
    assert m["page_delay_median_ms_iw1"] == 1000.0 and m["page_delay_median_ms_iw3"] == 3000.0
    assert m["utilisation_down"] == pytest.approx(0.5)
    assert m["drop_rate_down_pct"] == pytest.approx(2.0) and m["queue_drops_down"] == 20
    assert m["goodput_kbit"] == pytest.approx((30_000 + 50_000) * 8 / plan.duration_s / 1000)
    assert m["power_kbit_per_s2"] == pytest.approx(m["goodput_kbit"] / 2.0, rel=1e-3)
    assert len(pages) == 4


def test_e3_gain_is_baseline_over_variant():
    from p4netem_studies.experiments.analysis.e3 import gains
    stats = [{"profile_label": "c", "page": "p", "client": "https", "initcwnd": 3,
              "plt_ms_median": 1000.0},
             {"profile_label": "c", "page": "p", "client": "h2", "initcwnd": 10,
              "plt_ms_median": 500.0},
             {"profile_label": "d", "page": "p", "client": "h2", "initcwnd": 10,
              "plt_ms_median": 500.0}]
    gains(stats, {"client": "https", "initcwnd": 3}, ["profile_label", "page"])
    assert [s["gain"] for s in stats] == [1.0, 2.0, None]


def test_e4_tree_ranks_the_deciding_factor_first():
    from p4netem_studies.experiments.analysis.e4 import decision_tree
    import itertools
    cells = []
    for rtt, bw, loss, iw, size, n in itertools.product((20, 200), (1, 10), (0, 2), (3, 10),
                                                        (1000, 100000), (8, 64)):
        # Multiplexing "hurts" exactly when loss is high: the tree must find loss.
        cells.append({"f_rtt_ms": rtt, "f_down_mbit": bw, "f_loss_pct": loss, "initcwnd": iw,
                      "f_object_size": size, "f_embedded_objects": n,
                      "label": "hurts" if loss == 2 else "helps"})
    tree = decision_tree(cells)
    assert tree["ranking"][0][0] == "loss (%)" and tree["ranking"][0][1] == pytest.approx(1.0)
    assert tree["accuracy"] == 1.0 and "loss (%)" in tree["rules"]
    assert decision_tree(cells[:2]) is None


def test_pages_of_one_plan_never_share_a_host_name():
    """Pages of a plan are generated into one content tree by host name: two different pages
    on one host name would overwrite each other's files (SiteContent refuses that at run
    time; this finds it before any lab comes up)."""
    from p4netem_studies.web import pages as page_models
    for name in experiment_names():
        exp = load_experiment(name)
        if exp.kind != "pageload":
            continue
        owner: dict[str, str] = {}
        for page in build_plan(exp).plan.pages:
            for host in page_models.named(page).hosts:
                assert owner.setdefault(host, page) == page, (name, host, owner[host], page)


def test_cli_lists_shows_and_refuses_bad_runs_before_any_lab():
    from typer.testing import CliRunner
    from p4netem.cli import app
    runner = CliRunner()
    res = runner.invoke(app, ["experiment", "list"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    for name in experiment_names():
        assert name in res.output
    assert "40320 loads" in res.output                        # E4's full sweep
    res = runner.invoke(app, ["experiment", "show", "e5", "--quick"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "hspa+prewoken" in res.output
    res = runner.invoke(app, ["experiment", "run", "e1", "--quick", "--only", "colour=red"])
    assert res.exit_code == 2 and "error: --only takes" in res.output
    res = runner.invoke(app, ["experiment", "run", "e2", "--sample", "3"])
    assert res.exit_code == 2 and "no matrix to sample" in res.output


def test_every_named_page_generates_into_one_tree(tmp_path):
    """Every named page, and every page of the quick variants, written together as a lab does:
    each HTML holds its references and no page overwrites another's file."""
    from p4netem_studies.harness.endpoints import SiteContent
    from p4netem_studies.web import pages as page_models
    names = list(page_models.NAMES)
    for name in experiment_names():
        exp = load_experiment(name, quick=True)
        if exp.kind == "pageload":
            names += build_plan(exp).plan.pages
    content = SiteContent.generate(names, tmp_path, key_type="rsa2048")
    assert set(content.manifests) == set(names)


def test_e1_wan_rate_axis_puts_each_client_at_every_rate_side_by_side():
    from p4netem_studies.experiments.analysis.e1 import wan_rates

    def stat(net, client, plt, mode="-"):
        return {"profile_label": net, "page": "microscape", "initcwnd": 10, "client": client,
                "mode": mode, "n": 5, "plt_ms_median": plt, "plt_ms_q1": plt - 1,
                "plt_ms_q3": plt + 1, "packets_median": 100, "ip_bytes_median": 1000}
    stats = [stat("wan-90ms", "http1.0", 2000), stat("wan-90ms", "pipelined", 500),
             stat("wan-90ms-t1", "http1.0", 3000), stat("wan-90ms-t1", "pipelined", 1500),
             stat("lan-10mbit", "http1.0", 100)]
    rates = {"wan-90ms": 0, "wan-90ms-t3": 44_736_000, "wan-90ms-t1": 1_544_000}
    rows = wan_rates(stats, ["wan-90ms", "wan-90ms-t3", "wan-90ms-t1"], rates)
    got = {(r["profile_label"], r["client"]): r for r in rows}
    assert set(got) == {("wan-90ms", "http1.0"), ("wan-90ms", "pipelined"),
                        ("wan-90ms-t1", "http1.0"), ("wan-90ms-t1", "pipelined")}  # no T3 run
    assert got[("wan-90ms", "pipelined")]["speedup_vs_http1.0"] == 4.0
    assert got[("wan-90ms-t1", "pipelined")]["speedup_vs_http1.0"] == 2.0
    assert got[("wan-90ms-t1", "pipelined")]["vs_first_rate"] == 3.0
    assert got[("wan-90ms-t1", "http1.0")]["rate_bps"] == 1_544_000
    # One rate alone is no axis.
    assert wan_rates(stats[:2], ["wan-90ms", "wan-90ms-t1"], rates) == []


def test_workload_link_metrics_take_the_busiest_access_link_per_direction():
    from p4netem_studies.harness.workload import link_metrics

    def c(out_down: int, out_up: int, drops: int = 0) -> dict:
        return {DOWNLINK: PdCounters(0, 0, 0, 0, 0, {DropReason.QUEUE_FULL: drops}, 0, out_down),
                UPLINK: PdCounters(1, 0, 0, 0, 0, {}, 0, out_up)}
    # 10 Mbit/s links, a 10 s window: 12.5 MB would be a full link.
    c0 = {"client1": c(0, 0), "server1": c(1000, 0)}
    c1 = {"client1": c(1_250_000, 125_000, drops=3), "server1": c(126_000, 2_500_000)}
    m = link_metrics(c0, c1, 10e6, 10.0)
    assert m == {"access_max_utilisation_to_host": 0.1, "access_queue_drops_to_host": 3,
                 "access_max_utilisation_from_host": 0.2, "access_queue_drops_from_host": 0,
                 "access_links": 2}
    assert link_metrics({}, {}, 10e6, 10.0) == {}


def test_each_study_runs_its_eras_congestion_control():
    # 1997/1998: Reno-era stacks; 2011-2014: Linux's CUBIC (set per route: harness/tcp.py).
    assert {n: load_experiment(n).congestion_control for n in experiment_names()} == {
        "e1-microscape": "reno", "e2-initial-window": "reno", "e3-spdy": "cubic",
        "e4-multiplexing": "cubic", "e5-cellular": "cubic"}
