"""What the link did to a replayed capture: per-packet rows (CSV), distributions (table, JSON),
a plot, and `--expect` thresholds on the named metrics."""

from __future__ import annotations

import csv
import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path

from .match import Fate, PacketFate


def _pct(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


@dataclass
class ReplayReport:
    fates: list[PacketFate]
    foreign: int = 0  # received frames that match nothing sent
    bin_s: float = 0.1  # throughput bins
    meta: dict = field(default_factory=dict)

    @property
    def sent(self) -> int:
        return len(self.fates)

    def delays_ms(self) -> list[float]:
        return sorted(f.delay_ns / 1e6 for f in self.fates if f.delay_ns is not None)

    def loss_bursts(self) -> list[int]:
        """Lengths of the runs of consecutive lost frames, in send order."""
        runs, n = [], 0
        for f in self.fates:
            if f.fate is Fate.LOST:
                n += 1
            elif n:
                runs.append(n)
                n = 0
        if n:
            runs.append(n)
        return runs

    def throughput(self) -> tuple[list[float], list[float], list[float]]:
        """(bin start s, Mbit/s sent, Mbit/s received) from the first frame sent."""
        if not self.fates:
            return [], [], []
        t0 = self.fates[0].tx_ns
        end = max([f.tx_ns for f in self.fates] + [f.rx_ns for f in self.fates if f.rx_ns is not None])
        n = int((end - t0) / 1e9 / self.bin_s) + 1
        sent, recv = [0] * n, [0] * n
        for f in self.fates:
            sent[int((f.tx_ns - t0) / 1e9 / self.bin_s)] += f.length
            if f.rx_ns is not None:
                recv[int((f.rx_ns - t0) / 1e9 / self.bin_s)] += f.length * f.copies
        scale = 8 / self.bin_s / 1e6
        return [i * self.bin_s for i in range(n)], [b * scale for b in sent], [b * scale for b in recv]

    def metrics(self) -> dict[str, float | int | None]:
        d = self.delays_ms()
        lost = sum(f.fate is Fate.LOST for f in self.fates)
        bursts = self.loss_bursts()
        mean = sum(d) / len(d) if d else None
        span_s = ((self.fates[-1].tx_ns - self.fates[0].tx_ns) / 1e9) if len(self.fates) > 1 else 0.0
        return {
            "sent": self.sent,
            "delivered": sum(f.fate is not Fate.LOST for f in self.fates),
            "lost": lost,
            "loss_pct": 100.0 * lost / self.sent if self.sent else 0.0,
            "loss_bursts": len(bursts),
            "loss_burst_mean": sum(bursts) / len(bursts) if bursts else 0.0,
            "loss_burst_max": max(bursts, default=0),
            "duplicated": sum(f.duplicates for f in self.fates),
            "corrupted": sum(f.fate is Fate.CORRUPTED for f in self.fates),
            "reordered": sum(f.reordered for f in self.fates),
            "foreign": self.foreign,
            "delay_min_ms": d[0] if d else None,
            "delay_p50_ms": _pct(d, 50),
            "delay_p90_ms": _pct(d, 90),
            "delay_p99_ms": _pct(d, 99),
            "delay_max_ms": d[-1] if d else None,
            "delay_mean_ms": mean,
            "jitter_stdev_ms": math.sqrt(sum((x - mean) ** 2 for x in d) / len(d)) if d else None,
            "sent_mbps": sum(f.length for f in self.fates) * 8 / span_s / 1e6 if span_s else None,
        }

    def write_csv(self, path: str | Path) -> None:
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["index", "tx_ns", "length", "fate", "rx_ns", "delay_ms", "copies", "reordered",
                        "flipped_bits"])
            for f in self.fates:
                w.writerow([f.index, f.tx_ns, f.length, f.fate.value, f.rx_ns if f.rx_ns is not None else "",
                            f"{f.delay_ns / 1e6:.6f}" if f.delay_ns is not None else "", f.copies, int(f.reordered),
                            f.flipped_bits])

    def plot(self, path: str | Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
        t0 = self.fates[0].tx_ns if self.fates else 0
        got = [f for f in self.fates if f.delay_ns is not None]
        lost = [f for f in self.fates if f.fate is Fate.LOST]
        ax1.plot([(f.tx_ns - t0) / 1e9 for f in got], [f.delay_ns / 1e6 for f in got], ".", ms=2, label="delay")
        if lost:
            ax1.plot([(f.tx_ns - t0) / 1e9 for f in lost], [0] * len(lost), "x", color="red", ms=4, label="lost")
        ax1.set_ylabel("delay (ms)")
        ax1.legend(loc="upper right")
        t, s, r = self.throughput()
        ax2.step(t, s, where="post", label="sent")
        ax2.step(t, r, where="post", label="received")
        ax2.set_ylabel(f"Mbit/s ({self.bin_s:g} s bins)")
        ax2.set_xlabel("time since the first frame sent (s)")
        ax2.legend(loc="upper right")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq}
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_EXPECT = re.compile(rf"^\s*([a-z0-9_]+)\s*(<=|>=|==|<|>)\s*({_NUMBER})\s*$")


class ExpectError(ValueError):
    pass


def parse_expectations(text: str) -> list[tuple[str, str, float]]:
    """`loss_pct<=8,delay_p50_ms<25` -> [(metric, op, value)]; unknown metrics are named."""
    known = set(ReplayReport([]).metrics())
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        m = _EXPECT.match(item)
        if not m:
            raise ExpectError(f"--expect {item!r}: not METRIC<=VALUE, VALUE a number (operators <=, >=, <, >, ==)")
        if m.group(1) not in known:
            raise ExpectError(f"--expect {item!r}: unknown metric {m.group(1)!r}; known: {', '.join(sorted(known))}")
        out.append((m.group(1), m.group(2), float(m.group(3))))
    return out


def format_metric(value: float | int | None) -> str:
    """A metric as `p4netem replay` shows it, in its table and in a failed expectation's line
    alike: a float to 3 decimals (microseconds for the delays), a count as is, "" for none."""
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def check_expectations(metrics: dict, expectations: list[tuple[str, str, float]]) -> list[str]:
    """The expectations that do not hold, as lines: the value got as the table shows it, and
    unrounded too where that figure would seem to hold (`loss_pct <= 8: got 8.000 (8.0004)`)."""
    failed = []
    for name, op, value in expectations:
        got = metrics.get(name)
        if got is None:
            failed.append(f"{name} {op} {value:g}: got None")
        elif not _OPS[op](got, value):
            shown = format_metric(got)
            if _OPS[op](float(shown), value):
                shown += f" ({got!r})"
            failed.append(f"{name} {op} {value:g}: got {shown}")
    return failed
