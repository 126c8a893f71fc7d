"""Endpoint fidelity (issue 16): do the lab's protocol paths cost what the protocols cost?

- `h2c_vs_h1_plt_ratio`, `spdy_plain_vs_h1_plt_ratio`: median page-load time of plain HTTP/2
  (nginx h2c) and plain SPDY (node-spdy) over plain HTTP/1.1 (6 connections per host), and
  `tls_h2_vs_h1_plt_ratio` the same over TLS; lte-200ms (225 ms RTT), page e5-site1 on two
  origins (the multi-origin lab, one server each), server IW 10. Every path needs the same
  round trips there (docs/labs.md "Round trips per protocol path"), so a ratio above 1 is a
  round trip or a server's slowness the protocol does not have; bar 1.05.
- `reval_pipelined_packets_ratio`: packets in both directions of the Microscape page's
  revalidation (43 conditional GETs answered 304) over the 28.8k modem, pipelined (1024 B /
  50 ms flush) over persistent HTTP/1.1 on one connection, both from the server that buffers
  responses to pipelined requests as the E1 study's did (Apache, web/apache.py);
  `..._unbuffered` the same from nginx, which writes each response as it is done. Reported,
  no bar.

Each figure comes with the audited round trips and stalls of the loads (harness/rtt_audit.py),
the medians of `reps` loads, the lab's own run of the page-load harness (run_plan).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from rich.console import Console

from p4netem_studies.harness.measure import run_plan
from p4netem_studies.harness.plan import Condition, Plan

PROFILE, PAGE, IW = "lte-200ms", "e5-site1", 10
MODEM = "modem-28k8"
REVAL = ("--revalidate", "--accept-encoding", "identity")


def _medians(records, cond: Condition) -> dict:
    recs = [r for r in records if r.condition == cond and r.ok]
    if not recs:
        raise RuntimeError(f"no successful load of {cond.key}")
    med = lambda f: statistics.median(f(r) for r in recs)  # noqa: E731
    return {"plt_ms": med(lambda r: r.plt_ms), "rtts": med(lambda r: r.wire.rtts or 0),
            "stalls": med(lambda r: r.wire.stalls),
            "packets": med(lambda r: r.wire.packets_up + r.wire.packets_down), "loads": len(recs)}


def _run(name: str, conds: list[Condition], reps: int, **plan_kw) -> dict:
    plan = Plan(name, conds, repetitions=reps, **plan_kw)
    with tempfile.TemporaryDirectory(prefix="p4n-bench-endpoints-") as out:
        outcome = run_plan(plan, Path(out), console=Console(quiet=True), verbose=False,
                           make_plot=False)
    return {c.key: _medians(outcome.records, c) for c in conds}


def measure(reps: int = 5) -> dict:
    paths = {"h1": Condition(PROFILE, "h1.1", IW, tls=False, page=PAGE),
             "h2c": Condition(PROFILE, "h2", IW, tls=False, page=PAGE),
             "spdy": Condition(PROFILE, "spdy", IW, tls=False, page=PAGE),
             "h1_tls": Condition(PROFILE, "h1.1", IW, tls=True, page=PAGE),
             "h2_tls": Condition(PROFILE, "h2", IW, tls=True, page=PAGE)}
    plt = _run("bench-endpoints", list(paths.values()), reps, topology="multi-origin",
               topology_params={"servers": 2})
    m = {name: plt[c.key] for name, c in paths.items()}
    # Revalidation over the modem from the buffering server (Apache, E1's setup) and from nginx.
    reval = {f"{kind}_{srv}": Condition(MODEM, proto, IW, tls=False, page="microscape",
                                        conns_per_host=conns, label=kind, loader_args=REVAL,
                                        server_buffering=srv == "buffered")
             for kind, proto, conns in (("persistent", "h1.1", 1),
                                        ("pipelined", "h1.1-pipelined", None))
             for srv in ("buffered", "nginx")}
    rv = _run("bench-endpoints-reval", list(reval.values()), max(1, reps // 2), timeout_s=300)
    r = {name: rv[c.key] for name, c in reval.items()}
    return {
        "h2c_vs_h1_plt_ratio": round(m["h2c"]["plt_ms"] / m["h1"]["plt_ms"], 3),
        "spdy_plain_vs_h1_plt_ratio": round(m["spdy"]["plt_ms"] / m["h1"]["plt_ms"], 3),
        "tls_h2_vs_h1_plt_ratio": round(m["h2_tls"]["plt_ms"] / m["h1_tls"]["plt_ms"], 3),
        "reval_pipelined_packets_ratio": round(r["pipelined_buffered"]["packets"]
                                               / r["persistent_buffered"]["packets"], 3),
        "reval_pipelined_packets_ratio_unbuffered": round(r["pipelined_nginx"]["packets"]
                                                          / r["persistent_nginx"]["packets"], 3),
        "endpoints_config": {"profile": PROFILE, "page": PAGE, "initcwnd": IW, "reps": reps,
                             "topology": "multi-origin servers=2", "paths": m,
                             "reval": {"profile": MODEM, "page": "microscape", **r}},
    }
