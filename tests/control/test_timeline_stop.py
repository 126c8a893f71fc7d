"""A timeline stopped before a step it already prepared (the web server's stop button, Ctrl-C)
gives back what that step staged: its profile entries and the profile ids and rule numbers the
controller held for it. A long-lived controller (the web server's) would otherwise lose ids with
every stopped run until none were left."""

from __future__ import annotations

import threading

from p4netem import pipeline as pl
from p4netem.control import Controller, Timeline
from p4netem.control.timeline import TimelinePlayer


def test_a_stopped_timeline_gives_back_the_step_it_prepared(bare_switch) -> None:
    with Controller.connect(bare_switch.grpc_addr) as ctl:
        timeline = Timeline.loads("name: t\nsteps:\n  - apply: lan\n  - at: 30s\n    apply: lte\n", "t.yaml")
        stop = threading.Event()
        # Stopped once the first step is in force: the second (lte) is prepared by then.
        player = TimelinePlayer(ctl, timeline, on_event=lambda _: stop.set(), rt_priority=0, stop=stop)
        result = player.run()
        assert result.interrupted and len(result.events) == 1
        assert ctl.session.reserved_ids == set() and ctl.session.reserved_numbers == set()
        left = len(ctl.client.read_table_entries(pl.PROFILE))
        ctl.reset()
        ctl.apply("lan")
        assert left == len(ctl.client.read_table_entries(pl.PROFILE)), "lte's staged entries were left"
