"""Prometheus metrics (/metrics), with the official client library: a custom collector that turns
one SwitchStats read (the one the live stream shares, see session.py) into metric families at each
scrape, so the values are the switch's own counters, never a second count kept here.

Labels: `rule` ("#3", "default", "pd 14"), `direction` (uplink/downlink), `profile`; drops also
`reason`; radio metrics `ue`. Queue depth is the packets a rule holds now (in + duplicated - out -
dropped). The switch's own health (data-plane loop busy time, ring drops, buffers, P4Runtime
latency) is re-exported from its --metrics-addr when `p4netem web --switch-metrics URL` names it
(health.py).

The per-rule families are formatted row by row and kept while a row does not change
(RowExposition): the text is what prometheus_client's generate_latest writes, only not formatted
again for the thousands of idle rules at every scrape."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from ..control.readback import LinkStats, SwitchStats
from ..pipeline import PromotionKind, RadioState
from ..switch_health import HealthUnavailable, SwitchHealth
from .session import SwitchSession

_LINK = ["rule", "direction", "profile"]


def _row_families() -> dict[str, CounterMetricFamily | GaugeMetricFamily]:
    return {
        "pin": CounterMetricFamily("p4netem_packets_in", "Packets that entered a rule's profile", labels=_LINK),
        "pout": CounterMetricFamily("p4netem_packets_out", "Packets that left a rule's profile", labels=_LINK),
        "bin": CounterMetricFamily("p4netem_bytes_in", "Bytes that entered a rule's profile", labels=_LINK),
        "bout": CounterMetricFamily("p4netem_bytes_out", "Bytes that left a rule's profile", labels=_LINK),
        "dup": CounterMetricFamily("p4netem_duplicated_packets", "Duplicates made", labels=_LINK),
        "cor": CounterMetricFamily("p4netem_corrupted_packets", "Packets corrupted", labels=_LINK),
        "drop": CounterMetricFamily("p4netem_dropped_packets", "Packets dropped, by reason",
                                    labels=[*_LINK, "reason"]),
        "queue": GaugeMetricFamily("p4netem_queue_packets",
                                   "Packets a rule holds now (delay line and queue)", labels=_LINK),
    }


class _Families(Collector):
    def __init__(self, families: Iterable):
        self.families = list(families)

    def collect(self) -> Iterator:
        return iter(self.families)


def _exposition(families: Iterable) -> list[tuple[str, str]]:
    """(header, samples) text of each family, formatted by prometheus_client."""
    out = []
    for block in generate_latest(_Families(families)).decode().split("# HELP ")[1:]:
        help_line, type_line, samples = ("# HELP " + block).split("\n", 2)
        out.append((help_line + "\n" + type_line + "\n", samples))
    return out


class RowExposition:
    """The per-rule samples' text, formatted by prometheus_client and kept per row for as long as
    the row's counters are the same object (the StatsPoller hands back an unchanged row as the
    same LinkStats): with 1000 rules a scrape formats only the rows that moved, not 32 000
    samples (half a second of CPU on the switch's machine at every scrape)."""

    def __init__(self) -> None:
        self._rows: list[tuple[LinkStats, list[str]]] = []
        self._headers = [h for h, _ in _exposition(_row_families().values())]

    def text(self, rows: list[LinkStats]) -> str:
        if len(self._rows) > len(rows):
            del self._rows[len(rows):]
        for i, row in enumerate(rows):
            if i < len(self._rows) and self._rows[i][0] is row:
                continue
            entry = (row, [samples for _, samples in _exposition(self._families(row).values())])
            if i < len(self._rows):
                self._rows[i] = entry
            else:
                self._rows.append(entry)
        return "".join(header + "".join(lines[k] for _, lines in self._rows)
                       for k, header in enumerate(self._headers))

    def headers(self) -> str:
        """The families with no sample (the switch could not be read), the rows kept for later."""
        return "".join(self._headers)

    @staticmethod
    def _families(row: LinkStats) -> dict:
        fam = _row_families()
        labels = [row.label, row.direction, row.profile]
        c = row.counters
        fam["pin"].add_metric(labels, c.profile_in)
        fam["pout"].add_metric(labels, c.profile_out)
        fam["bin"].add_metric(labels, c.bytes_in)
        fam["bout"].add_metric(labels, c.bytes_out)
        fam["dup"].add_metric(labels, c.profile_dup)
        fam["cor"].add_metric(labels, c.profile_corrupt)
        for reason, n in c.drops.items():
            fam["drop"].add_metric([*labels, reason.name.lower()], n)
        fam["queue"].add_metric(labels, max(0, c.conservation_gap()))
        return fam


class SwitchCollector(Collector):
    """Everything but the per-rule families (RowExposition), which metrics_text() adds."""

    def __init__(self, session: SwitchSession, health: SwitchHealth | None = None):
        self.session = session
        self.health = health
        self.stats: SwitchStats | None = None  # the read this scrape's text is made of

    def collect(self) -> Iterator:
        # Every family is there at every scrape, with no samples while the switch cannot be read
        # (p4netem_switch_up 0 says so), and the switch's own health is read whether or not
        # P4Runtime answers: an alert on either `up` fires, and the other side still shows.
        up = GaugeMetricFamily("p4netem_switch_up", "1 when the switch answered the last scrape's read")
        t0 = time.monotonic()
        self.stats = None
        try:
            self.stats = self.session.stats()
        except Exception:  # a scrape of a switch that is down says so, it does not fail
            pass
        took = time.monotonic() - t0
        stats = self.stats
        up.add_metric([], 0 if stats is None else 1)
        yield up
        parser = CounterMetricFamily("p4netem_parser_errors", "Frames the parser rejected, by error", labels=["error"])
        state = GaugeMetricFamily("p4netem_ue_radio_state", "1 for each UE's current RRC state", labels=["ue", "state"])
        promo = CounterMetricFamily("p4netem_ue_promotions", "Radio promotions per UE, by kind", labels=["ue", "kind"])
        energy = GaugeMetricFamily("p4netem_ue_energy_joules", "Estimated radio energy per UE", labels=["ue"])
        if stats is not None:
            for err, n in stats.parser_errors.items():
                parser.add_metric([err.name.lower()], n)
            for ue in stats.radio.ues:
                current = ue.state
                for s in RadioState:
                    state.add_metric([str(ue.ue_id), s.name.lower()], 1 if current == s else 0)
                # Every kind, 0 included (the switch's reader keeps only non-zero counts): a
                # series that first appears at 1 hides that promotion from rate() and increase(),
                # which count only what a series adds after its first sample: a UE that woke
                # once showed no promotion at all on the dashboard.
                for kind in PromotionKind:
                    promo.add_metric([str(ue.ue_id), kind.name.lower()], ue.radio.promotions.get(kind, 0))
                if ue.energy is not None:
                    energy.add_metric([str(ue.ue_id)], ue.energy.total_joules)
        yield from (parser, state, promo, energy)
        read = GaugeMetricFamily("p4netem_scrape_read_seconds", "Time to read the switch for this scrape")
        read.add_metric([], took)
        yield read
        if self.health is not None:
            health_up = GaugeMetricFamily("p4netem_switch_health_up",
                                          "1 when the switch's own metrics (--switch-metrics) answered")
            try:
                families = self.health.families()
            except HealthUnavailable:
                families = []
            health_up.add_metric([], 1 if families else 0)
            yield health_up
            yield from families  # the switch's own families (p4netem_switch_*), as it serves them


class Metrics:
    """The /metrics text: the collector's families, then the per-rule ones."""

    def __init__(self, session: SwitchSession, health: SwitchHealth | None = None):
        self.collector = SwitchCollector(session, health)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.rows = RowExposition()

    def text(self) -> bytes:
        head = generate_latest(self.registry)
        stats = self.collector.stats
        return head + (self.rows.text(stats.rows) if stats is not None else self.rows.headers()).encode()


