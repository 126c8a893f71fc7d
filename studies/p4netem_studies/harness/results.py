"""Results of a plan: per-run rows, per-condition medians and quartiles, written as CSV and JSON
with the run's full metadata, and printed as a table.

Files in the output directory:
  runs.csv       one row per load (every measurement and the condition it ran under)
  summary.csv    one row per condition: n, median and quartiles of the page-load times, medians
                 of the packet/byte/connection counts
                 (both end with the TCP environment: kernel, sysctls, route windows; environment.py)
  results.json   metadata (kernel, software versions, topology, TCP sysctls and routes per host
                 and initial window, profiles as applied, radio), the plan, the runs, the summary
  plot.png       see plot.py
"""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from .environment import with_environment
from .plan import Plan
from .runner import RunRecord

# Measures summarised with median and quartiles (ms).
TIMES = ("plt_ms", "loader_elapsed_ms", "onload_ms", "first_syn_to_synack_ms",
         "handshake_excess_ms", "dns_ms_max", "radio_wake_ms", "radio_prewake_ms")
# Measures summarised with their median only.
COUNTS = ("connections_opened", "connections_used", "packets_up", "packets_down", "bytes_up",
          "bytes_down", "payload_up", "payload_down", "retransmissions_down",
          "request_header_bytes", "radio_promotions", "rtts", "stalls", "stall_ms", "window_waits")


def quartiles(values: list[float]) -> tuple[float, float, float] | None:
    """(q1, median, q3); with one value all three are that value."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    if len(vals) == 1:
        return vals[0], vals[0], vals[0]
    q1, med, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    return q1, med, q3


@dataclass
class ConditionSummary:
    key: str
    row: dict

    @property
    def plt(self) -> tuple[float, float, float] | None:
        if self.row.get("plt_ms_median") is None:
            return None
        return self.row["plt_ms_q1"], self.row["plt_ms_median"], self.row["plt_ms_q3"]


def summarize(plan: Plan, records: list[RunRecord]) -> list[ConditionSummary]:
    out = []
    for cond in plan.conditions:
        recs = [r for r in records if r.condition == cond]
        if not recs:
            continue
        ok = [r for r in recs if r.ok]
        rows = [r.row() for r in ok]
        row = {"key": cond.key, "profile": cond.profile, "profile_label": cond.profile_label,
               "radio": cond.radio, "protocol": cond.protocol, "tls": cond.tls,
               "initcwnd": cond.initcwnd, "page": cond.page, "variant": cond.variant,
               "runs": len(recs), "ok": len(ok)}
        for name in TIMES:
            q = quartiles([x[name] for x in rows if x.get(name) is not None])
            row[f"{name}_q1"], row[f"{name}_median"], row[f"{name}_q3"] = (
                tuple(round(v, 3) for v in q) if q else (None, None, None))
        for name in COUNTS:
            vals = [x[name] for x in rows if x.get(name) is not None]
            row[f"{name}_median"] = statistics.median(vals) if vals else None
        # Loads whose capture shows a wait no window explains (the RTT audit): flagged in the
        # table, since such a load measures the lab, not the protocol.
        row["stalled_loads"] = sum(1 for x in rows if (x.get("stalls") or 0) > 0)
        radio = recs[0].radio
        row["radio_model"] = radio.get("model")
        row["radio_applied"] = radio.get("applied")
        row["radio_note"] = radio.get("note")
        row["errors"] = " | ".join(sorted({e for r in recs for e in r.errors}))[:1000]
        out.append(ConditionSummary(cond.key, row))
    return out


def write(out_dir: str | Path, plan: Plan, records: list[RunRecord], metadata: dict,
          summary: list[ConditionSummary]) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"runs": out / "runs.csv", "summary": out / "summary.csv", "json": out / "results.json"}
    # Every file says what the stack was (kernel, congestion control, TCP sysctls, the IW the
    # routes carried), not only results.json.
    write_csv(paths["runs"], [r.row() for r in records], metadata)
    write_csv(paths["summary"], [s.row for s in summary], metadata)
    doc = {"format": "p4netem-results/1", "metadata": metadata, "plan": plan.to_json(),
           "summary": [s.row for s in summary], "runs": [r.to_json() for r in records]}
    _replace(paths["json"], json.dumps(doc, indent=1, default=str) + "\n")
    return paths


PCAP_DIR = "pcaps"


def drop_other_pcaps(out_dir: str | Path, keep: set[str] | frozenset = frozenset()) -> list[str]:
    """Remove the captures in OUT/pcaps whose names are not in `keep`: those of an earlier run
    into the same --out (a run of fewer loads, or one without --keep-pcaps, left the first run's
    beside its own results, where they pass for this run's). Only `*.pcap` files there go, each
    with its capture's log (web.capture: tcpdump's output, NAME.log); returns their names."""
    gone = []
    for path in sorted((Path(out_dir) / PCAP_DIR).glob("*.pcap")):
        if path.name not in keep and path.is_file():
            path.unlink(missing_ok=True)
            path.with_suffix(".log").unlink(missing_ok=True)
            gone.append(path.name)
    return gone


_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _replace(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a temporary file renamed over it): a run written while
    it goes can be killed in the middle of a write without leaving a cut file."""
    # A name of its own: `experiment analyze` may write the same files while the run does.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)     # as open() would make it (mkstemp's is 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv(path: Path, rows: list[dict], metadata: dict | None = None) -> Path:
    """Rows as CSV (columns in first-seen order); with `metadata`, each row also gets the run's
    TCP environment columns."""
    if metadata is not None:
        rows = with_environment(rows, metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not rows:
        _replace(path, "")
        return path
    fields = list(dict.fromkeys(k for row in rows for k in row))
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
    _replace(path, text.getvalue())
    return path


def _fmt_s(q: tuple[float, float, float] | None) -> str:
    if q is None:
        return "-"
    q1, med, q3 = (v / 1000.0 for v in q)
    digits = 3 if med < 1 else 2 if med < 10 else 1
    return f"{med:.{digits}f} [{q1:.{digits}f}-{q3:.{digits}f}]"


def _wake_ups(row: dict) -> str:
    """'1 x 1.80 s': promotions per load and the first one's duration (medians), '0' for a load
    that found the radio awake, '-' without a radio."""
    if not row.get("radio_applied"):
        return "-"
    n, wake = row.get("radio_promotions_median"), row.get("radio_wake_ms_median")
    if not n:
        return "0" if n == 0 else "-"
    return f"{n:.0f}" + ("" if wake is None else f" x {wake / 1000:.2f} s")


def table(summary: list[ConditionSummary], title: str = "page-load time") -> Table:
    """Rows: profile x protocol; columns: each initial window's median [quartiles] page-load
    time in seconds (first SYN to last server packet), then connections, packets, the first
    handshake's round trip, the round trips the RTT audit counted (flagged `!N` when N loads
    stalled) and, with a radio, the promotions per load and the wake-up's duration as the switch
    reported them (medians of the largest initial window)."""
    iws = sorted({s.row["initcwnd"] for s in summary})
    t = Table(title=escape(f"{title}: page-load time, median [q1-q3] s "
                           "(first SYN to last server packet)"), title_justify="left")
    t.add_column("profile")
    t.add_column("protocol")
    for iw in iws:
        t.add_column(f"IW {iw}", justify="right")
    if len(iws) == 2:
        t.add_column(f"IW{iws[0]}/IW{iws[1]}", justify="right")
    t.add_column("conns", justify="right")
    t.add_column("pkts dn/up", justify="right")
    t.add_column("SYN-ACK ms", justify="right")
    t.add_column("RTTs", justify="right")
    radio = any(s.row.get("radio_applied") for s in summary)
    if radio:
        t.add_column("radio wake-ups", justify="right")
    t.add_column("ok", justify="right")
    groups: dict[tuple, dict[int, ConditionSummary]] = {}
    for s in summary:
        r = s.row
        proto = r["variant"].split(" iw")[0]
        groups.setdefault((r["profile_label"], proto, r["page"]), {})[r["initcwnd"]] = s
    notes: dict[str, str] = {}
    last_profile = None
    for (profile, proto, _page), cells in groups.items():
        if last_profile is not None and profile != last_profile:
            t.add_section()
        last_profile = profile
        first = next(iter(cells.values())).row
        label = profile
        if first.get("radio") and not first.get("radio_applied"):
            label += "*"
            notes["*"] = f"{profile}: radio requested, not applied: {first.get('radio_note')}"
        vals = [_fmt_s(cells[iw].plt) if iw in cells else "-" for iw in iws]
        if len(iws) == 2:
            a, b = (cells.get(iw) for iw in iws)
            ratio = (f"{a.plt[1] / b.plt[1]:.2f}" if a and b and a.plt and b.plt and b.plt[1]
                     else "-")
            vals.append(ratio)
        ref = cells[max(cells)].row
        conns = ref.get("connections_opened_median")
        pk = (f"{ref['packets_down_median']:.0f}/{ref['packets_up_median']:.0f}"
              if ref.get("packets_down_median") is not None else "-")
        syn = ref.get("first_syn_to_synack_ms_median")
        ok = f"{sum(c.row['ok'] for c in cells.values())}/{sum(c.row['runs'] for c in cells.values())}"
        extra = [_wake_ups(ref)] if radio else []
        rtts = ref.get("rtts_median")
        stalled = sum(c.row.get("stalled_loads") or 0 for c in cells.values())
        rtt_cell = "-" if rtts is None else f"{rtts:g}"
        if stalled:
            rtt_cell += f" !{stalled}"
            notes["!"] = ("!N: N loads of the row stalled (the RTT audit found a wait no "
                          "window explains: stalls, stall_ms in runs.csv)")
        t.add_row(label, proto, *vals, "-" if conns is None else f"{conns:.0f}", pk,
                  "-" if syn is None else f"{syn:.1f}" if syn < 10 else f"{syn:.0f}",
                  rtt_cell, *extra, ok)
    if notes:
        t.caption = escape("  ".join(f"{k} {v}" for k, v in notes.items()))
        t.caption_justify = "left"
    return t


class StoredRecord:
    """A load as the run store holds it (RunRecord.to_json()), with what summaries, result files
    and analyses use of a RunRecord: condition (the plan's Condition), rep, ok, errors, radio,
    row() and to_json(). A load that was given up (its labs died) has only key, ok and errors."""

    def __init__(self, doc: dict, condition):
        self._doc = doc
        self.condition = condition
        self.rep = doc.get("rep", 0)
        self.ok = bool(doc.get("ok"))
        errors = doc.get("errors") or []
        self.errors = errors if isinstance(errors, list) else [errors]
        self.radio = doc.get("radio") or {}

    def row(self) -> dict:
        row = {k: v for k, v in self._doc.items() if k not in ("condition", "wire", "radio")}
        if "profile" not in row:      # given up: the condition's columns, nothing measured
            row = {"key": self.condition.key, "profile": self.condition.profile,
                   "profile_label": self.condition.profile_label, "protocol": self.condition.protocol,
                   "tls": self.condition.tls, "initcwnd": self.condition.initcwnd,
                   "page": self.condition.page, "variant": self.condition.variant,
                   "rep": self.rep, "ok": False}
        row["errors"] = " | ".join(self.errors)[:2000]
        return row

    def to_json(self) -> dict:
        d = dict(self._doc)
        d.setdefault("condition", self.condition.to_json())
        return d
