"""The data plane's liveness as `/api/health` and `p4netem stats --switch-metrics` judge it from the
switch's metrics text (switch_health._liveness): the switch's own rule (dataplane/src/health.rs
`stalest`: older than the timeout is stalled, equal is fresh), each thread named, and a switch that
exports no heartbeats (built before them) neither running nor stalled but unknown."""

from __future__ import annotations

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from p4netem.cli.show_cmd import dataplane_line
from p4netem.switch_health import _liveness, stall_message

def _live(samples: str) -> dict:
    """The liveness of a switch's metrics text with these heartbeat ages (and the default timeout)."""
    text = ("# TYPE p4netem_switch_heartbeat_age_seconds gauge\n" + samples
            + "# TYPE p4netem_switch_heartbeat_timeout_seconds gauge\np4netem_switch_heartbeat_timeout_seconds 3.0\n"
            + "# EOF\n")
    return _liveness({f.name: f for f in text_string_to_metric_families(text)})


def test_an_age_at_the_timeout_is_fresh_and_one_over_it_stalled() -> None:
    live = _live('p4netem_switch_heartbeat_age_seconds{thread="dataplane"} 3.0\n'
                 'p4netem_switch_heartbeat_age_seconds{thread="tx",port="2",iface="veth2"} 0.4\n')
    assert live == {"serving": True, "timeout_s": 3.0, "stalled": [], "threads": [
        {"thread": "dataplane", "age_s": 3.0}, {"thread": "tx", "port": 2, "iface": "veth2", "age_s": 0.4}]}
    assert stall_message(live) is None
    assert str(dataplane_line(live)) == "data plane: running (every thread ran within the last 3.0 s; stalled after 3 s)"
    # Under a second in ms: an idle loop beats every 100 ms, and "0.0 s" said nothing.
    live = _live('p4netem_switch_heartbeat_age_seconds{thread="dataplane"} 0.038\n')
    assert str(dataplane_line(live)) == "data plane: running (every thread ran within the last 38 ms; stalled after 3 s)"

    live = _live('p4netem_switch_heartbeat_age_seconds{thread="dataplane"} 0.05\n'
                 'p4netem_switch_heartbeat_age_seconds{thread="tx",port="2",iface="veth2"} 3.0001\n')
    assert live["serving"] is False
    assert live["stalled"] == [{"thread": "tx", "port": 2, "iface": "veth2", "age_s": 3.0}]
    assert stall_message(live) == ("data plane stalled: the TX thread of port 2 (veth2) has not run for 3.0 s "
                                   "(the switch's --heartbeat-timeout-ms: 3 s)")
    assert str(dataplane_line(live)).startswith("data plane: STALLED: the TX thread of port 2 (veth2)")


def test_a_switch_without_heartbeats_is_unknown() -> None:
    text = "# TYPE p4netem_switch_buffers gauge\np4netem_switch_buffers 65536\n# EOF\n"
    live = _liveness({f.name: f for f in text_string_to_metric_families(text)})
    assert live == {"serving": None, "timeout_s": None, "threads": [], "stalled": []}
    assert stall_message(live) is None
    assert "liveness unknown" in str(dataplane_line(live))
    assert _live("")["serving"] is None  # the families declared with no sample: nothing known either
