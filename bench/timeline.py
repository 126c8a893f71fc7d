"""Timeline step error: how late each scheduled profile change is in force at the switch.

The controller (p4netem.control, election id 2: it takes over from the bench's own client) runs a
timeline of CHANGES changes, one every STEP_MS, alternating two profiles that differ only in their
delay (NEAR_MS / FAR_MS, both directions), on the default rule (ports 1 <-> 2, above the bench's
own entries). Probes cross the switch h1 -> h2 at PROBE_PPS all along. Two errors per change:

- ack error (`timeline_step_error_ms_*`): when the switch acknowledged the change's one flip Write
  minus the scheduled time, from the player's own record (CLOCK_MONOTONIC). The switch publishes
  the batch before it answers, so the change is in force by then: an upper bound of its lateness.
- wire error (`timeline_wire_error_ms_*`): send time of the first probe that got the new delay
  minus the scheduled time (CLOCK_REALTIME). An upper bound: the change happened after the last
  probe with the old delay, and probes are 1/PROBE_PPS apart, except that the sender often stalls
  for about a millisecond right after a change (the controller's own work competes with it for
  the 2 CPUs), which this figure then includes.

Figures are the p50, p99 and max over the changes (the first change, which creates the rule, is
left out: it is an insert, not a switch). The rule is removed afterwards, leaving the switch as
found.
"""
from __future__ import annotations

import bisect
import statistics
import time

from common import finish, percentile, send, sink
from topo import Topo

from p4netem.control import Controller, Profile, Rule, Timeline

CHANGES = 100
STEP_MS = 100
NEAR_MS, FAR_MS = 1, 21  # far enough apart that no probe is labelled wrong by path noise
PROBE_PPS = 2000
PROBE_FRAME = 100
PROBE_PORT = 5111
RESOLVED_MS = 1.0  # probes bracketing a change this closely date it to within a probe interval
RULE = Rule.between_ports(1, 2)


def _timeline() -> Timeline:
    near = Profile.parse({"name": "bench-near", "both": {"delay": f"{NEAR_MS}ms"}})
    far = Profile.parse({"name": "bench-far", "both": {"delay": f"{FAR_MS}ms"}})
    steps = [{"at": f"{i * STEP_MS}ms", "apply": far.name if i % 2 else near.name} for i in range(CHANGES + 1)]
    steps.append({"wait": f"{STEP_MS}ms"})
    return Timeline.parse({"name": "bench", "profiles": [near.to_dict(), far.to_dict()], "steps": steps})


def _wire_bounds(rec: dict, events, start_wall_ns: int) -> list[tuple[float, float]]:
    """Per change: (tx of the last probe with the old delay, tx of the first with the new one),
    both minus the scheduled time, in ms. The change took effect between the two."""
    probes = sorted(zip(rec["tx_ns"], (rx - tx for rx, tx in zip(rec["rx_ns"], rec["tx_ns"]))))
    tx = [t for t, _ in probes]
    threshold = (NEAR_MS + FAR_MS) / 2 * 1e6
    bounds = []
    for e in events:
        scheduled = start_wall_ns + e.event.at_ns
        far = int(e.event.profile.uplink.delay) > threshold
        lo = bisect.bisect_left(tx, scheduled - STEP_MS * 1e6 / 2)
        hi = bisect.bisect_left(tx, scheduled + STEP_MS * 1e6 / 2)
        window = probes[lo:hi]
        # The change point: the first probe after which every probe of the window has the new delay.
        first_new = last_old = None
        for t, d in reversed(window):
            if (d > threshold) != far:
                last_old = t
                break
            first_new = t
        if first_new is None or last_old is None:
            bounds.append((float("-inf"), float("inf")))  # no probe pair brackets it: unresolved
            continue
        bounds.append(((last_old - scheduled) / 1e6, (first_new - scheduled) / 1e6))
    return bounds


def measure(t: Topo, grpc_addr: str, device_id: int) -> dict:
    timeline = _timeline()
    duration = (CHANGES + 2) * STEP_MS / 1e3 + 1.0
    with Controller.connect(grpc_addr, device_id=device_id, election_id=2) as ctl:
        try:
            with sink(t, t.h2, PROBE_PORT, idle=1.0) as done:
                sender = send(t, t.h1, t.h2.ip, PROBE_PORT, PROBE_PPS * PROBE_FRAME * 8, PROBE_FRAME,
                              duration=duration, background=True)
                time.sleep(0.5)
                result = ctl.run_timeline(timeline, [RULE], lead_s=0.2)
                sent = finish(sender)
                rec = done()
        finally:
            if ctl.state().find(RULE) is not None:
                ctl.remove([RULE])
    events = result.events[1:]
    ack = [e.error_ns / 1e6 for e in events]
    send_err = [e.send_error_ns / 1e6 for e in events]
    bounds = _wire_bounds(rec, events, result.start_wall_ns)
    # The change happened between the two probes; the figures use the later one (an upper bound).
    # The probe stream often has a gap of about 1 ms right after a change: the controller's own
    # work per change (the flip, then preparing the next one) competes with the sender for the 2
    # CPUs. Changes bracketed within RESOLVED_MS are counted in the config.
    dated = [(lo, hi) for lo, hi in bounds if hi - lo < 1e9]
    upper = [hi for _, hi in dated]
    abs_wire = [abs(w) for w in upper]
    return {
        "timeline_step_error_ms_p50": statistics.median(ack),
        "timeline_step_error_ms_p99": percentile(ack, 99),
        "timeline_step_error_ms_max": max(ack),
        "timeline_wire_error_ms_p50": statistics.median(upper),
        "timeline_wire_error_ms_p99": percentile(abs_wire, 99),
        "timeline_wire_error_ms_max": max(abs_wire),
        "timeline_config": {
            "changes": len(events), "step_ms": STEP_MS, "profiles_delay_ms": [NEAR_MS, FAR_MS],
            "probe_pps": PROBE_PPS, "probes_sent": sent["sent"], "probes_received": len(rec["seq"]),
            "send_error_ms_p50": statistics.median(send_err), "send_error_ms_max": max(send_err),
            # Changes whose preparation (a Read and write A, at normal priority) was not done by their
            # time: these are late because the controller process did not get a CPU for that long.
            "prepared_late": sum(e.prepared_ns > e.scheduled_ns for e in events),
            "prepared_late_ms_max": max((e.prepared_ns - e.scheduled_ns) / 1e6 for e in events),
            "wire_dated": len(dated), "wire_undated": len(bounds) - len(dated),
            "wire_within_resolution": sum(hi - lo <= RESOLVED_MS for lo, hi in dated),
            "wire_lower_bound_ms_p50": statistics.median(lo for lo, _ in dated),
            "ack_error_ms": [round(a, 3) for a in ack],
            "wire_bounds_ms": [(round(lo, 3), round(hi, 3)) if hi - lo < 1e9 else None for lo, hi in bounds],
            "how": "ack = switch acknowledged the flip Write - scheduled (CLOCK_MONOTONIC); wire = tx of "
                   "the first probe with the new delay - scheduled (probes 0.5 ms apart; an upper bound, "
                   "the last probe with the old delay gives the lower bound)",
        },
    }
