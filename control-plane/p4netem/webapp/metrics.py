"""Prometheus metrics (/metrics), with the official client library: a custom collector that turns
one SwitchStats read (the one the live stream shares, see session.py) into metric families at each
scrape, so the values are the switch's own counters, never a second count kept here.

Labels: `rule` ("#3", "default", "pd 14"), `direction` (uplink/downlink), `profile`; drops also
`reason`; radio metrics `ue`. Queue depth is the packets a rule holds now (in + duplicated - out -
dropped). The data-plane loop's own health (busy fraction, ring drops) is not readable over
P4Runtime yet and is not exported."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from ..pipeline import RadioState
from .session import SwitchSession

_LINK = ["rule", "direction", "profile"]


class SwitchCollector(Collector):
    def __init__(self, session: SwitchSession):
        self.session = session

    def collect(self) -> Iterator:
        up = GaugeMetricFamily("p4netem_switch_up", "1 when the switch answered the last scrape's read")
        t0 = time.monotonic()
        try:
            stats = self.session.stats()
        except Exception:  # a scrape of a switch that is down says so, it does not fail
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        fam = {
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
        for row in stats.rows:
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
        yield from fam.values()
        parser = CounterMetricFamily("p4netem_parser_errors", "Frames the parser rejected, by error", labels=["error"])
        for err, n in stats.parser_errors.items():
            parser.add_metric([err.name.lower()], n)
        yield parser
        state = GaugeMetricFamily("p4netem_ue_radio_state", "1 for each UE's current RRC state", labels=["ue", "state"])
        promo = CounterMetricFamily("p4netem_ue_promotions", "Radio promotions per UE, by kind", labels=["ue", "kind"])
        energy = GaugeMetricFamily("p4netem_ue_energy_joules", "Estimated radio energy per UE", labels=["ue"])
        for ue in stats.radio.ues:
            current = ue.state
            for s in RadioState:
                state.add_metric([str(ue.ue_id), s.name.lower()], 1 if current == s else 0)
            for kind, n in ue.radio.promotions.items():
                promo.add_metric([str(ue.ue_id), kind.name.lower()], n)
            if ue.energy is not None:
                energy.add_metric([str(ue.ue_id)], ue.energy.total_joules)
        yield from (state, promo, energy)
        took = GaugeMetricFamily("p4netem_scrape_read_seconds", "Time to read the switch for this scrape")
        took.add_metric([], time.monotonic() - t0)
        yield took


def registry(session: SwitchSession) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SwitchCollector(session))
    return reg
