"""The original studies' conclusions as checks over a run's rows.

Each claim is what the original study (or, for E5, the published measurements cellular.md
summarises) concluded, in words, with the statistic that tests it in this run: a ratio or a
difference of medians per subject (a network, a channel and page, a cell ...), its bootstrap
interval, and a threshold. A check:

- agrees       the whole interval is on the claimed side of the threshold;
- disagrees    the whole interval is on the other side;
- inconclusive the interval spans the threshold, or a sample is too small for an interval.

A claim over several subjects agrees when some checks agree and none disagrees (and the
reverse), is `mixed` when some agree and some disagree, `inconclusive` when none is decided,
and `not measured` when the run has no rows for it (a quick slice leaves some out). A
`both ways` claim (E3: "mixed results") agrees when some subjects are above and some below.

The thresholds and subject filters below are this report's reading of each study's words; the
report prints them next to the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..experiments.definition import ExperimentError
from .bootstrap import Interval
from .estimates import Estimator, matching, sample
from .reader import RunData

AGREES, DISAGREES, INCONCLUSIVE = "agrees", "disagrees", "inconclusive"
MIXED, NOT_MEASURED = "mixed", "not measured"
ABOVE, BELOW = "above", "below"


@dataclass(frozen=True)
class Check:
    """One subject's statistic and its verdict against the claim's threshold."""

    subject: str
    interval: Interval
    op: str                       # ">" (claim: above the threshold), "<", or "<>" (either way)
    threshold: float

    @property
    def side(self) -> int:
        return self.interval.side_of(self.threshold)

    @property
    def verdict(self) -> str:
        if self.op == "<>":
            return {1: ABOVE, -1: BELOW}.get(self.side, INCONCLUSIVE)
        want = 1 if self.op == ">" else -1
        return AGREES if self.side == want else DISAGREES if self.side == -want else INCONCLUSIVE

    @property
    def why(self) -> str:
        if self.side:
            return ""
        if not self.interval.has_interval:
            return f"no interval: {' and '.join(str(n) for n in self.interval.n)} values"
        return f"the interval spans {self.threshold:g}"


@dataclass
class Claim:
    study: str
    claim: str                    # the original's conclusion, in words
    source: str                   # who said it
    measure: str                  # the statistic, per subject
    op: str
    threshold: float
    unit: str = ""
    checks: list[Check] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.checks:
            out[c.verdict] = out.get(c.verdict, 0) + 1
        return out

    @property
    def verdict(self) -> str:
        if not self.checks:
            return NOT_MEASURED
        n = self.counts
        if self.op == "<>":
            if n.get(ABOVE) and n.get(BELOW):
                return AGREES
            if not n.get(INCONCLUSIVE):
                return DISAGREES           # every subject decided, all on one side
            return INCONCLUSIVE
        if n.get(AGREES) and n.get(DISAGREES):
            return MIXED
        if n.get(AGREES):
            return AGREES
        if n.get(DISAGREES):
            return DISAGREES
        return INCONCLUSIVE

    @property
    def summary(self) -> str:
        """'4 subjects: 3 agree, 1 inconclusive'."""
        n = self.counts
        total = len(self.checks)
        if not total:
            return "no rows of this run test it"
        plural = {AGREES: "agree", DISAGREES: "disagree"}
        parts = [f"{v} {plural.get(k, k) if v > 1 else k}" for k, v in n.items()]
        return f"{total} subject{'s' if total != 1 else ''}: " + ", ".join(parts)


def _groups(rows: list[dict], keys: list[str]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out


def _label(keys: list[str], values: tuple) -> str:
    """'wan-90ms, IW 10, revalidation': a subject as the study's tables name it."""
    parts = []
    for k, v in zip(keys, values):
        if v in (None, "-", ""):
            continue
        parts.append(f"IW {v}" if k == "initcwnd" else "revalidation" if v == "reval"
                     else f"{k.removeprefix('f_')} {v}" if k.startswith("f_") else str(v))
    return ", ".join(parts)


def _pairs(est: Estimator, claim: Claim, rows: list[dict], *, by: list[str], side: str,
           a, b, metric: str, kind: str = "ratio") -> Claim:
    """One check per group of `by`: statistic(median of the `a` rows, median of the `b` rows),
    a/b being values of the `side` column (a client, a network ...)."""
    for key, rs in _groups(rows, by).items():
        sa, sb = (sample(matching(rs, **{side: v}), metric) for v in (a, b))
        if not sa.n or not sb.n:
            continue
        fn = est.ratio if kind == "ratio" else est.difference
        claim.checks.append(Check(_label(by, key), fn(sa, sb, (claim.study, claim.claim, key)),
                                  claim.op, claim.threshold))
    return claim


# ---- E1: Nielsen et al., SIGCOMM 1997 -----------------------------------------------------------

E1_SOURCE = "Nielsen et al., Network Performance Effects of HTTP/1.1, CSS1, and PNG (SIGCOMM 1997)"


def e1_claims(data: RunData, est: Estimator) -> list[Claim]:
    rows = data.rows("e1-runs")
    page = [r for r in rows if r.get("page") == "microscape"]
    first = [r for r in page if r.get("mode") == "-"]
    html = [r for r in rows if r.get("page") == "microscape-html"]
    by = ["profile_label", "initcwnd", "mode"]

    def mk(text: str, measure: str, op: str, threshold: float, unit: str = "") -> Claim:
        return Claim("e1", text, E1_SOURCE, measure, op, threshold, unit)
    return [
        _pairs(est, mk("Pipelined HTTP/1.1 loads the page faster than HTTP/1.0 with parallel "
                       "connections (first-time and revalidation)",
                       "median time HTTP/1.0 / median time pipelined", ">", 1.0, "x"),
               page, by=by, side="client", a="http1.0", b="pipelined", metric="plt_ms"),
        _pairs(est, mk("Pipelined HTTP/1.1 sends fewer packets than HTTP/1.0",
                       "median packets HTTP/1.0 / median packets pipelined", ">", 1.0, "x"),
               page, by=by, side="client", a="http1.0", b="pipelined", metric="packets"),
        _pairs(est, mk("An HTTP/1.1 client without pipelining (persistent, one request at a "
                       "time) is slower than HTTP/1.0 with parallel connections",
                       "median time HTTP/1.1 serialized / median time HTTP/1.0", ">", 1.0, "x"),
               page, by=by, side="client", a="http1.1", b="http1.0", metric="plt_ms"),
        _pairs(est, mk("Persistent pipelined connections spend a smaller share of the bytes "
                       "on TCP/IP headers",
                       "median header overhead HTTP/1.0 - pipelined", ">", 0.0, "% points"),
               page, by=by, side="client", a="http1.0", b="pipelined",
               metric="header_overhead_pct", kind="difference"),
        _pairs(est, mk("Deflating the HTML cuts the bytes of the page (first-time retrieval)",
                       "median IP bytes pipelined / pipelined+deflate", ">", 1.0, "x"),
               first, by=by, side="client", a="pipelined", b="pipelined+deflate",
               metric="ip_bytes"),
        _pairs(est, mk("Deflate shortens the single GET of the 42 KB HTML over the 28.8k modem",
                       "median time plain / deflated", ">", 1.0, "x"),
               html, by=["profile_label", "initcwnd"], side="client", a="get", b="get+deflate",
               metric="plt_ms"),
    ]


# ---- E2: RFC 2415, 1998 -------------------------------------------------------------------------

E2_SOURCE = "Poduri and Nichols, Simulation Studies of Increased Initial TCP Window Size (RFC 2415)"


def e2_claims(data: RunData, est: Estimator) -> list[Claim]:
    runs = [r for r in data.rows("runs") if r.get("ok")]
    pages = [p for p in data.rows("pages") if p.get("in_window") and p.get("ok")]
    # One IW for every client host (not the 1/3 mix): IW 1 against the largest.
    single = [r for r in runs if "/" not in str(r.get("initcwnd_label"))]
    delay = Claim("e2", "A larger initial window (3-4 segments) shortens the median page delay "
                  "of short web transfers, with HTTP/1.0 and HTTP/1.1", E2_SOURCE,
                  "median page delay at IW 1 / at the largest IW (pages, grouped by run)",
                  ">", 1.0, "x")
    drops = Claim("e2", "... at the cost of a somewhat higher drop rate at the bottleneck",
                  E2_SOURCE, "median drop rate (down) at the largest IW - at IW 1 (runs)",
                  ">", 0.0, "% points")
    util = Claim("e2", "... without lowering the bottleneck's utilisation", E2_SOURCE,
                 "median utilisation (down) at the largest IW / at IW 1 (runs), within 5%",
                 ">", 0.95, "x")
    for key, rs in _groups(single, ["http", "web_clients", "bulk_clients"]).items():
        iws = sorted({r["initcwnd"] for r in rs})
        if len(iws) < 2 or iws[0] != 1:
            continue
        lo, hi = iws[0], iws[-1]
        subject = f"HTTP/{key[0]}, {key[1]} web, {key[2]} bulk, IW 1 vs {hi}"
        keys = {iw: {r["key"] for r in rs if r["initcwnd"] == iw} for iw in (lo, hi)}
        d = {iw: sample([p for p in pages if p["key"] in keys[iw]], "delay_ms",
                        cluster_by="rep") for iw in (lo, hi)}
        delay.checks.append(Check(subject, est.ratio(d[lo], d[hi], ("e2", "delay", key)),
                                  delay.op, delay.threshold))
        r_ = {iw: [r for r in rs if r["initcwnd"] == iw] for iw in (lo, hi)}
        drops.checks.append(Check(subject, est.difference(
            sample(r_[hi], "drop_rate_down_pct"), sample(r_[lo], "drop_rate_down_pct"),
            ("e2", "drops", key)), drops.op, drops.threshold))
        util.checks.append(Check(subject, est.ratio(
            sample(r_[hi], "utilisation_down"), sample(r_[lo], "utilisation_down"),
            ("e2", "util", key)), util.op, util.threshold))
    return [delay, drops, util]


# ---- E3: White, Mulé and Rice (CableLabs), 2012 -------------------------------------------------

E3_SOURCE = "White, Mulé and Rice, Analysis of SPDY and TCP Initcwnd (CableLabs, 2012)"


def _baseline(data: RunData) -> tuple[str, int]:
    b = ((data.experiment.get("definition") or {}).get("options") or {}).get("baseline") or {}
    return b.get("client", "https"), int(b.get("initcwnd", 3))


def e3_claims(data: RunData, est: Estimator) -> list[Claim]:
    rows = data.rows("e3-runs")
    base_client, base_iw = _baseline(data)
    mixed = Claim("e3", "SPDY (one multiplexed connection per server) gives mixed results: "
                  "page loads get faster in some scenarios and significantly slower in others",
                  E3_SOURCE, f"gain = median PLT {base_client} IW {base_iw} / median PLT of "
                  "the multiplexed client, same channel, page and IW", "<>", 1.0, "x")
    loss = Claim("e3", "Packet loss hurts the multiplexed single connection most: its gain "
                 "falls when the channel loses packets", E3_SOURCE,
                 "gain without loss / gain with loss (same rate, RTT, page, client, IW)",
                 ">", 1.0, "x")
    muxed = sorted({r["client"] for r in rows if r["client"] != base_client})
    by_cell = _groups(rows, ["profile_label", "page"])
    for (prof, page), rs in by_cell.items():
        base = sample(matching(rs, client=base_client, initcwnd=base_iw), "plt_ms")
        for client in muxed:
            for iw in sorted({r["initcwnd"] for r in rs if r["client"] == client}):
                var = sample(matching(rs, client=client, initcwnd=iw), "plt_ms")
                if base.n and var.n:
                    mixed.checks.append(Check(f"{prof}, {page}, {client} IW {iw}",
                                              est.ratio(base, var, ("e3", prof, page, client, iw)),
                                              "<>", 1.0))
    # Channels that differ only in loss: pair each lossy channel with its lossless twin.
    chan = {}
    for r in rows:
        chan.setdefault(r["profile_label"], (r.get("f_down_mbit"), r.get("f_up_mbit"),
                                              r.get("f_rtt_ms"), r.get("f_loss_pct")))
    for lossy, (down, up, rtt, pct) in chan.items():
        if not pct:
            continue
        twins = [p for p, f in chan.items() if f == (down, up, rtt, 0) or f == (down, up, rtt, 0.0)]
        if not twins:
            continue
        clean = twins[0]
        for page in sorted({r["page"] for r in rows if r["profile_label"] == lossy}):
            def s(prof, client, iw):
                return sample(matching(rows, profile_label=prof, page=page, client=client,
                                       initcwnd=iw), "plt_ms")
            for client in muxed:
                for iw in sorted({r["initcwnd"] for r in rows if r["client"] == client}):
                    samples = [s(clean, base_client, base_iw), s(clean, client, iw),
                               s(lossy, base_client, base_iw), s(lossy, client, iw)]
                    if not all(x.n for x in samples):
                        continue
                    iv = est.combined(lambda a, b, c, d: (a / b) / (c / d), samples,
                                      ("e3", "loss", lossy, page, client, iw))
                    loss.checks.append(Check(f"{page}, {client} IW {iw}: {clean} vs {pct:g}% loss",
                                             iv, loss.op, loss.threshold))
    return [mixed, loss]


# ---- E4: Wang et al., NSDI 2014 -----------------------------------------------------------------

E4_SOURCE = "Wang, Balasubramanian, Krishnamurthy and Wetherall, How Speedy is SPDY? (NSDI 2014)"
E4_CELL = ["f_rtt_ms", "f_down_mbit", "f_loss_pct", "initcwnd", "f_embedded_objects",
           "f_object_size"]


def _e4_subject(key: tuple) -> str:
    rtt, bw, loss, iw, n, size = key
    return f"{rtt:g} ms, {bw:g} Mbit/s, loss {loss:g}%, IW {iw}, {n} x {size} B"


def e4_claims(data: RunData, est: Estimator) -> list[Claim]:
    rows = data.rows("e4-runs")
    opts = (data.experiment.get("definition") or {}).get("options") or {}
    base, mux = opts.get("baseline", "http1.1"), opts.get("multiplexed", "h2")
    small = Claim("e4", "One multiplexed connection helps pages of many small objects",
                  E4_SOURCE, f"median PLT {base} / {mux}, cells without loss with at least 32 "
                  "objects of at most 10 KB", ">", 1.0, "x")
    lossy = Claim("e4", "One multiplexed connection hurts under high packet loss", E4_SOURCE,
                  f"median PLT {base} / {mux}, cells with at least 1% loss", "<", 1.0, "x")
    retx = Claim("e4", "Under loss the single connection takes the losses six connections "
                 "would share: more retransmissions per connection", E4_SOURCE,
                 f"median retransmissions per connection {mux} - {base}, cells with loss",
                 ">", 0.0, "segments")
    for key, rs in _groups(rows, E4_CELL).items():
        if any(v is None for v in key):
            continue
        rtt, bw, loss, iw, n, size = key
        b, m = matching(rs, client=base), matching(rs, client=mux)
        if not b or not m:
            continue
        ck = ("e4",) + key
        if loss == 0 and n >= 32 and size <= 10_000:
            small.checks.append(Check(_e4_subject(key), est.ratio(
                sample(b, "plt_ms"), sample(m, "plt_ms"), ck + ("plt",)), ">", 1.0))
        if loss >= 1:
            lossy.checks.append(Check(_e4_subject(key), est.ratio(
                sample(b, "plt_ms"), sample(m, "plt_ms"), ck + ("plt",)), "<", 1.0))
        if loss > 0:
            retx.checks.append(Check(_e4_subject(key), est.difference(
                sample(m, "retransmissions_per_connection"),
                sample(b, "retransmissions_per_connection"), ck + ("retx",)), ">", 0.0))
    return [small, lossy, retx, _e4_tree(data, est)]


TREE_RESAMPLES = 200        # each resample refits the tree: 200 keep a 400-cell report in seconds


def _e4_tree(data: RunData, est: Estimator) -> Claim:
    """The analysis' decision tree (analysis/e4.py), refit on resamples of the labelled cells:
    how far the top factor other than the initial window stands above the initial window."""
    from ..experiments.analysis.e4 import FACTORS, decision_tree
    from .bootstrap import seed_for, statistic_ci
    names = dict(FACTORS)
    iw = names["initcwnd"]
    claim = Claim("e4", "The decision tree puts the page's factors (object size and number) and "
                  "the network's (RTT, bandwidth, loss) at the top, not the initial window",
                  E4_SOURCE, "importance of the top factor other than the initial window - "
                  f"importance of the initial window (the analysis' depth-4 tree, refit on "
                  f"{TREE_RESAMPLES} resamples of the labelled cells)", ">", 0.0)
    cells = [c for c in data.rows("e4-cells") if c.get("label")]
    if not cells:
        return claim
    seed = int((data.experiment.get("definition") or {}).get("seed") or 1)

    def margin(sample: list[dict]) -> float | None:
        tree = decision_tree(sample, seed)
        if tree is None:
            return None
        imp = dict(tree["ranking"])
        return max(v for k, v in imp.items() if k != iw) - imp.get(iw, 0.0)

    iv = statistic_ci(margin, cells, seed=seed_for(est.seed, "e4", "tree"),
                      resamples=TREE_RESAMPLES, confidence=est.confidence)
    claim.checks.append(Check(f"{len(cells)} labelled cells", iv, ">", 0.0))
    return claim


# ---- E5: the 2011 thesis, as cellular.md summarises it -----------------------------------------

E5_SOURCE = ("Thesis on web transport over Finnish GPRS/HSPA/LTE (2011), Qian et al. (IMC 2010), "
             "Huang et al. (MobiSys 2012), as cellular.md summarises them")


def e5_claims(data: RunData, est: Estimator) -> list[Claim]:
    rows = data.rows("e5-runs")
    by = ["page", "client", "initcwnd", "tls_label"]
    wake = Claim("e5", "On HSPA the first packet after idle waits for the radio's promotion, "
                 "1.5-2 s (median 1.8 s)", E5_SOURCE,
                 "median first SYN-ACK, idle radio - pre-woken radio, at least 1.5 s",
                 ">", 1500.0, "ms")
    prewake = Claim("e5", "Pre-waking the radio removes the promotion from the page load",
                    E5_SOURCE, "median PLT, idle HSPA radio / pre-woken", ">", 1.0, "x")
    lte = Claim("e5", "On LTE the promotion is short: under 0.3 s", E5_SOURCE,
                "median first SYN-ACK on an idle LTE radio - the profile's RTT", "<", 300.0,
                "ms")
    gprs = Claim("e5", "On GPRS the first packet waits 0.5-1 s: at least 0.5 s", E5_SOURCE,
                 "median first SYN-ACK on an idle GPRS radio - the profile's RTT", ">", 500.0,
                 "ms")
    _pairs(est, wake, rows, by=by, side="network", a="hspa+radio", b="hspa+prewoken",
           metric="first_syn_to_synack_ms", kind="difference")
    _pairs(est, prewake, rows, by=by, side="network", a="hspa+radio", b="hspa+prewoken",
           metric="plt_ms")
    for claim, net in ((lte, "lte+radio"), (gprs, "gprs+radio")):
        for key, rs in _groups(matching(rows, network=net), by).items():
            rtts = {r.get("f_rtt_ms") for r in rs}
            if len(rtts) != 1 or None in rtts:
                continue
            rtt = float(rtts.pop())
            s = sample(rs, "first_syn_to_synack_ms")
            iv = est.combined(lambda x, rtt=rtt: x - rtt, [s], ("e5", net, key))
            claim.checks.append(Check(_label(by, key) + f" (RTT {rtt:g} ms)", iv, claim.op,
                                      claim.threshold))
    return [wake, prewake, lte, gprs]


CLAIMS: dict[str, Callable[[RunData, Estimator], list[Claim]]] = {
    "e1": e1_claims, "e2": e2_claims, "e3": e3_claims, "e4": e4_claims, "e5": e5_claims}


def claims_for(data: RunData, est: Estimator | None = None) -> list[Claim]:
    """The original study's claims, checked on the run's rows."""
    fn = CLAIMS.get(data.analysis)
    if fn is None:
        return []
    try:
        return fn(data, est or Estimator())
    except KeyError as exc:
        raise ExperimentError(f"{data.directory}: the rows lack the column {exc} the "
                              f"{data.analysis} claims use (files of an older analysis? run "
                              "`p4netem experiment analyze` on the directory again)") from None


__all__ = ["AGREES", "DISAGREES", "INCONCLUSIVE", "MIXED", "NOT_MEASURED", "Check", "Claim",
           "claims_for"]
