"""StatsPoller (control/stats_poller.py), the dashboard's and /metrics' stats: each poll equals a
full Controller.stats() of the same moment, while reading only the counters that can have moved
(profile_in of every pd and the busy rows in full) and the rules only when they change, ours
(invalidate) or another controller's (the layout check)."""

from __future__ import annotations

import time

from p4netem import pipeline as pl
from p4netem.control import Controller
from p4netem.control.stats_poller import StatsPoller

RULES = 40


def _rows(stats) -> list[dict]:
    return [r.to_dict() for r in stats.rows]


def _quiet_equal(poller: StatsPoller, reader: Controller) -> list[dict]:
    """A poll and a full read of the same, quiet switch (nothing in flight): equal."""
    polled = _rows(poller.poll())
    full = _rows(reader.stats())
    assert polled == full
    return polled


def test_poll_equals_a_full_read_and_reads_only_what_moved(lab, ctl):
    ctl.apply_many([(f"client=10.1.0.{i + 1}", "lan") for i in range(RULES - 1)]
                   + [("client.switch_port=1,server.switch_port=2", "lte")])
    with Controller.connect(lab.switch.grpc_addr, primary=False) as reader:
        poller = StatsPoller(reader.session, reader.readback, layout_check_s=3600)
        rows = _quiet_equal(poller, reader)
        assert len(rows) == 2 * RULES + 1 and poller.layout_reads == 1
        pds = 4 * RULES + 1                       # two directions x (profile, spare) per rule + default
        idle_cells = poller.cells_read
        assert idle_cells == pds + 4              # profile_in of each pd, the 4 parser-error cells

        # Traffic on the last rule: its rows are read in full, the others stay as they were.
        lab.h1.ns.run(["ping", "-c", "20", "-i", "0.05", "-W", "2", lab.h2.ip], timeout=60)
        time.sleep(0.3)                           # lte's delay line empties
        rows = _quiet_equal(poller, reader)
        busy = [r for r in rows if r["packets_in"]]
        assert [(r["label"], r["direction"]) for r in busy] == [(f"#{RULES}", "uplink"), (f"#{RULES}", "downlink")]
        assert all(r["packets_in"] == 20 and r["packets_out"] == 20 and r["held"] == 0 for r in busy), busy
        assert poller.cells_read > idle_cells
        # Nothing held and nothing new: idle again, back to profile_in only.
        _quiet_equal(poller, reader)
        _quiet_equal(poller, reader)
        assert poller.cells_read == idle_cells and poller.layout_reads == 1

        # Our own write: invalidate() reads the rules again.
        ctl.set({"downlink.delay": "77ms"}, ["client=10.1.0.1"])
        poller.invalidate()
        rows = _quiet_equal(poller, reader)
        assert rows[0]["profile_label"] == "lan (modified)" and poller.layout_reads == 2

        # Counters written by someone else (zeroed) move profile_in: read in full, as the switch has them.
        for pd in {pd for row in poller.layout.rows for pd in row.pds if row.label == f"#{RULES}"}:
            for counter in (pl.PROFILE_IN, pl.PROFILE_OUT):
                ctl.client.write_counter(counter, pd)
        assert all(r["packets_in"] == 0 for r in _quiet_equal(poller, reader))


def test_another_controllers_rules_are_seen_at_the_layout_check(lab, ctl):
    ctl.apply_many([(f"client=10.1.0.{i + 1}", "lan") for i in range(4)])
    with Controller.connect(lab.switch.grpc_addr, primary=False) as reader:
        poller = StatsPoller(reader.session, reader.readback, layout_check_s=0.5)
        assert len(_quiet_equal(poller, reader)) == 2 * 4 + 1
        ctl.apply("gprs", ["client=10.1.0.9"])                  # not told to the poller
        ctl.set({"uplink.loss": "1%"}, ["client=10.1.0.2"])
        time.sleep(0.6)
        rows = _quiet_equal(poller, reader)
        assert len(rows) == 2 * 5 + 1 and poller.layout_reads == 2
        assert {r["profile_label"] for r in rows if r["label"] != "default"} == {"lan", "lan (modified)", "gprs"}
