"""The report page: one self-contained HTML file per run (`report.html` in the run directory).

Self-contained means viewable offline and from anywhere: the style is inline, the study's
plots are PNG data URIs and the claim plots SVG data URIs (matplotlib, fonts as paths), there is
no script and no link to anything outside the file, so a browser fetches nothing.

Sections: the run (what, when, how long, failed loads), the comparison with the original
study (claims, verdicts, intervals, a plot per claim), the study's plots, medians and the
study's gains/ratios with bootstrap intervals, the analysis' own tables, the environment
(kernel, congestion control, sysctls, software versions) and how the intervals are made.
"""

from __future__ import annotations

import base64
import io
import json
import textwrap
from pathlib import Path

import jinja2

from ..harness.environment import environment_columns, roles_of
from .bootstrap import Interval
from .claims import Claim, claims_for
from .estimates import Estimator, IntervalTable, median_table, ratio_table
from .reader import RunData

TEMPLATE = Path(__file__).with_name("report.html.j2")
# The analysis' main table per study (shown as written, without the environment columns,
# which the environment section has once).
MAIN_TABLES = {"e1": "e1-table", "e2": "e2-table", "e3": "e3-table", "e4": "e4-cells",
               "e5": "e5-table"}
# The environment columns every CSV repeats (harness/environment.py), when the metadata does
# not say which they are (a run without results.json).
ENV_COLUMNS = {"kernel", "tcp_congestion_control", "tcp_no_metrics_save",
               "tcp_slow_start_after_idle", "tcp_sack", "tcp_timestamps", "tcp_window_scaling",
               "tcp_early_retrans", "tcp_recovery", "tcp_rmem", "tcp_wmem", "tcp_ecn",
               "tcp_fastopen", "tcp_autocorking", "tcp_notsent_lowat", "server_route_initcwnd",
               "servers_differ", "client_tcp_congestion_control", "client_tcp_rmem",
               "client_route_initrwnd"}
VERDICT_CLASS = {"agrees": "ok", "disagrees": "bad", "mixed": "warn", "inconclusive": "grey",
                 "not measured": "grey", "above": "info", "below": "info"}


# ---- formatting ---------------------------------------------------------------------------------

def _num(v: float, unit: str = "") -> str:
    if unit == "s":
        v = v / 1000.0
    a = abs(v)
    s = (f"{v:.0f}" if a >= 1000 else f"{v:.1f}" if a >= 100 else f"{v:.2f}" if a >= 1
         else f"{v:.3f}" if a > 0 else "0")
    return s


def fmt_interval(iv: Interval | None, unit: str = "") -> str:
    """'2.94 [2.93-3.04] s', '2.59x [2.39-2.65]', '- (no loads)'."""
    if iv is None or iv.estimate is None:
        return "-"
    suffix = {"s": " s", "ms": " ms", "x": "x", "% points": " pp", "segments": ""}.get(unit, "")
    est = _num(iv.estimate, unit)
    if not iv.has_interval:
        return f"{est}{suffix} (n={'/'.join(str(n) for n in iv.n)}, no interval)"
    return f"{est}{suffix} [{_num(iv.low, unit)} to {_num(iv.high, unit)}]"


def data_uri(payload: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"


# ---- plots --------------------------------------------------------------------------------------

MAX_PLOTTED_CHECKS = 60


def claim_plot(claim: Claim) -> str | None:
    """The claim's checks as a forest plot (estimate and interval per subject, the threshold
    as a line), as an SVG data URI; None without checks."""
    checks = [c for c in claim.checks if c.interval.estimate is not None]
    if not checks:
        return None
    checks = checks[:MAX_PLOTTED_CHECKS]
    from ..experiments.analysis.plots import pyplot
    plt = pyplot()
    plt.rcParams["svg.hashsalt"] = "p4netem-report"      # same files, same page
    scale = 1000.0 if claim.unit == "s" else 1.0
    h = 0.8 + 0.28 * len(checks)
    fig, ax = plt.subplots(figsize=(7.5, h))
    # A "both ways" claim's subjects are above or below, neither good nor bad: blue.
    colors = {"agrees": "#2e7d32", "above": "#1565c0", "disagrees": "#c62828",
              "below": "#1565c0", "inconclusive": "#757575"}
    for i, c in enumerate(reversed(checks)):
        iv = c.interval
        color = colors.get(c.verdict, "#757575")
        if iv.has_interval:
            ax.plot([iv.low / scale, iv.high / scale], [i, i], color=color, linewidth=2)
        ax.plot([iv.estimate / scale], [i], "o", color=color, markersize=4)
    ax.axvline(claim.threshold / scale, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(checks)), [c.subject[:70] for c in reversed(checks)], fontsize=7)
    label = claim.measure + (f" ({claim.unit})" if claim.unit else "")
    ax.set_xlabel("\n".join(textwrap.wrap(label, 70)), fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    # Ratios spanning more than a decade (E4's cells) on a log axis, the rest linear.
    values = [v for c in checks for v in (c.interval.estimate, c.interval.low, c.interval.high)
              if v is not None]
    if claim.unit == "x" and min(values) > 0 and max(values) / min(values) > 10:
        ax.set_xscale("log")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return data_uri(buf.getvalue().encode(), "image/svg+xml")


# ---- sections -----------------------------------------------------------------------------------

def _interval_rows(t: IntervalTable) -> dict:
    notes = sorted({iv.note for _, cols in t.rows for iv in cols.values() if iv and iv.note})
    return {"title": t.title, "note": "; ".join(([t.note] if t.note else []) + notes),
            "header": [k.removeprefix("f_") for k in t.keys] + list(t.columns),
            "rows": [[("-" if v is None else str(v)) for v in key] +
                     [fmt_interval(cols.get(m), u) for m, u in t.columns.items()]
                     for key, cols in t.rows]}


def _environment_by_iw(md: dict) -> dict:
    """initial window -> the environment columns the CSVs carry for it."""
    roles = roles_of(md)
    return {iw: environment_columns(md, iw, roles)
            for iw in (md.get("tcp_environment_by_initcwnd") or {})}


def _csv_table(rows: list[dict], env_columns: set[str]) -> dict:
    cols = [c for c in dict.fromkeys(k for r in rows for k in r) if c not in env_columns]

    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)
    return {"header": cols, "rows": [[cell(r.get(c)) for c in cols] for r in rows]}


def _execution(exp: dict) -> list[tuple[str, str]]:
    """How the run executed (runs/: the store's counts, each session, the labs and their
    nodes), when experiment.json says."""
    out = []
    loads = exp.get("loads")
    if isinstance(loads, dict):
        out.append(("loads", f"{loads.get('stored', '-')} of {loads.get('planned', '-')} stored, "
                             f"{loads.get('failed', '-')} failed"))
    for i, ses in enumerate(exp.get("sessions") or []):
        if not isinstance(ses, dict):
            continue
        t0, t1 = ses.get("t_start"), ses.get("t_end")
        took = f", {t1 - t0:.0f} s" if isinstance(t0, (int, float)) and \
            isinstance(t1, (int, float)) else ""
        labs = ses.get("labs", "-")
        out.append((f"session {i + 1}", f"{ses.get('kind', '-')} {ses.get('outcome', '-')}, "
                                        f"{labs} lab{'' if labs == 1 else 's'}{took}"))
    labs = [lab for lab in exp.get("labs") or [] if isinstance(lab, dict)]
    if labs:
        nodes = sorted({str(lab.get("node")) for lab in labs})
        out.append(("labs", f"{len(labs)} on {len(nodes)} node{'s' if len(nodes) != 1 else ''} "
                            f"({', '.join(nodes)})"))
    return out


def _environment(data: RunData) -> dict:
    md = data.metadata
    exp = data.experiment
    host = md.get("host") or {}
    build = md.get("p4netem") or {}
    run = [("experiment", f"{exp.get('experiment')} ({exp.get('variant')})"),
           ("command", exp.get("command") or "-"),
           ("started", exp.get("started") or md.get("started") or "-"),
           ("duration", f"{exp.get('duration_s')} s" if exp.get("duration_s") is not None
            else "-"),
           ("overrides", json.dumps({k: v for k, v in (exp.get("overrides") or {}).items()
                                     if v is not None}) or "-"),
           ("congestion control (definition)",
            str((exp.get("definition") or {}).get("congestion_control", "-"))),
           ("kernel", host.get("kernel", "-")),
           ("machine", f"{host.get('machine', '-')}, {host.get('cpus', '-')} CPUs"),
           ("load average at start / end",
            f"{host.get('loadavg_start', '-')} / {host.get('loadavg_end', '-')}"),
           ("python", host.get("python", "-")),
           ("p4netem", f"{build.get('git', '-')} "
                       f"(switch target {build.get('switch_target', '-')})")]
    run += _execution(exp)
    software = [(k, str(v)) for k, v in (md.get("software") or {}).items()]
    if md.get("tls"):
        software.append(("TLS of the servers", json.dumps(md["tls"])))
    tcp_header, tcp_rows = [], []
    cols = _environment_by_iw(md)
    if cols:
        names = list(dict.fromkeys(k for c in cols.values() for k in c))
        tcp_header = ["setting"] + [f"IW {iw}" for iw in cols]
        tcp_rows = [[n] + [str(c.get(n, "-")) for c in cols.values()] for n in names]
    # Per host: {sysctl: {before, after}} (other entries, such as how congestion control was
    # set, are in the table above as columns).
    changed = []
    for hostname, settings in (md.get("tcp_sysctls_set") or {}).items():
        if not isinstance(settings, dict):
            continue
        for name, ba in settings.items():
            if isinstance(ba, dict) and {"before", "after"} <= set(ba):
                changed.append([hostname, name, str(ba["before"]), str(ba["after"])])
    return {"run": run, "software": software, "tcp_header": tcp_header, "tcp_rows": tcp_rows,
            "changed": changed}


def render(data: RunData, *, seed: int = 1, resamples: int = 2000, confidence: float = 0.95,
           claims: list[Claim] | None = None) -> str:
    """The report page of a run as HTML text (`claims`: claims_for's, if already made with the
    same options)."""
    est = Estimator(seed=seed, resamples=resamples, confidence=confidence)
    if claims is None:
        claims = claims_for(data, est)
    runs = data.rows("runs")
    failed = [r for r in runs if r.get("ok") is False]
    # Loads the RTT audit flagged (runs.csv stalls > 0): listed, and counted beside the failures.
    stalled = [r for r in runs if r.get("ok") is not False and _stalls(r) > 0]
    exp = data.experiment
    claim_views = []
    for c in claims:
        claim_views.append({
            "claim": c.claim, "source": c.source, "measure": c.measure,
            "threshold": f"{c.op if c.op != '<>' else 'either side of'} {c.threshold:g}"
                         + (f" {c.unit}" if c.unit and c.unit != "x" else ""),
            "verdict": c.verdict, "cls": VERDICT_CLASS.get(c.verdict, "grey"),
            "summary": c.summary, "plot": claim_plot(c),
            "plot_note": (f"The plot shows the first {MAX_PLOTTED_CHECKS} of "
                          f"{len(c.checks)} subjects; the table has every one."
                          if len(c.checks) > MAX_PLOTTED_CHECKS else ""),
            "checks": [{"subject": k.subject, "value": fmt_interval(k.interval, c.unit),
                        "verdict": k.verdict, "cls": VERDICT_CLASS.get(k.verdict, "grey"),
                        "why": k.why, "note": k.interval.note} for k in c.checks]})
    interval_tables = [_interval_rows(t) for t in (median_table(data, est), ratio_table(data, est))
                       if t is not None and t.rows]
    main = MAIN_TABLES.get(data.analysis)
    env_columns = {k for c in _environment_by_iw(data.metadata).values() for k in c} or \
        ENV_COLUMNS
    analysis_tables = [{"title": f"{name}.csv", **_csv_table(data.rows(name), env_columns)}
                       for name in [main] if name and data.rows(name)]
    plots = [{"name": f"{name}.png", "uri": data_uri(path.read_bytes(), "image/png")}
             for name, path in data.plots.items()]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    return env.get_template(TEMPLATE.name).render(
        exp=exp, name=data.name, incomplete=incomplete(exp), title=exp.get("title", ""),
        reproduces=exp.get("reproduces", ""),
        variant=exp.get("variant", ""), loads=len(runs), failed=failed, stalled=stalled,
        plan=exp.get("plan") or {}, claims=claim_views, plots=plots,
        interval_tables=interval_tables, analysis_tables=analysis_tables,
        texts=data.texts, environment=_environment(data), seed=seed, resamples=resamples,
        confidence=confidence, counts=_verdict_counts(claims))


def incomplete(exp: dict) -> tuple[int, int] | None:
    """(loads stored, loads planned) of a run that stopped before its end (experiment.json's
    counts), None for a complete one or when it does not say."""
    loads = exp.get("loads")
    if not isinstance(loads, dict):
        return None
    stored, planned = loads.get("stored"), loads.get("planned")
    if isinstance(stored, int) and isinstance(planned, int) and stored < planned:
        return stored, planned
    return None


def _stalls(row: dict) -> float:
    try:
        return float(row.get("stalls") or 0)
    except (TypeError, ValueError):
        return 0.0


def _verdict_counts(claims: list[Claim]) -> list[tuple[str, int, str]]:
    out: dict[str, int] = {}
    for c in claims:
        out[c.verdict] = out.get(c.verdict, 0) + 1
    return [(k, v, VERDICT_CLASS.get(k, "grey")) for k, v in out.items()]


def write_report(data: RunData, path: Path | None = None, *, seed: int = 1,
                 resamples: int = 2000, confidence: float = 0.95) -> tuple[Path, list[Claim]]:
    """Writes the page (default: the run directory's report.html); returns it and the claims
    with their verdicts."""
    path = Path(path) if path else data.directory / "report.html"
    claims = claims_for(data, Estimator(seed=seed, resamples=resamples, confidence=confidence))
    path.write_text(render(data, seed=seed, resamples=resamples, confidence=confidence,
                           claims=claims))
    return path, claims
