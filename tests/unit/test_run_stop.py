"""A stopped run says what it waits for (runs/driver.py `_close_all`): at once, which labs it takes
down; and, if one of them has not ended after SAY_WAITING_AFTER_S, which one and on which node.
The lab here never answers once stopped (a Ray node that is gone: its actor's death is never
confirmed), so the stop runs to its deadline. End to end, with a real Ray cluster and real labs:
tests/labs/test_lab_experiment_runs.py (the Ctrl-C tests)."""

from __future__ import annotations

import time

import pytest

from p4netem_studies.runs import driver as driver_mod
from p4netem_studies.runs.driver import Driver
from p4netem_studies.runs.store import Job, RunStore


class SilentLab:
    """Comes up, takes its job, then never answers again."""
    aborted = 0

    def submit(self, job):
        pass

    def close(self):
        pass

    def abort(self):
        self.aborted += 1


class Backend:
    def __init__(self):
        self.waits = 0
        self.lab = SilentLab()

    def start_lab(self, session, lab_id, index, shared):
        return self.lab

    def wait(self, labs, timeout):
        self.waits += 1
        if self.waits == 1:
            return [(self.lab, ("up", {"node": "node-a"}))]
        if self.waits == 2:
            raise KeyboardInterrupt      # Ctrl-C while the lab runs its load
        time.sleep(min(timeout, 0.1))
        return []


def test_a_stop_names_the_labs_it_waits_for(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_mod, "CLOSE_DEADLINE_S", 3.0)
    monkeypatch.setattr(driver_mod, "SAY_WAITING_AFTER_S", 1.0)
    store = RunStore.create(tmp_path / "run")
    store.write_plan([Job("load0", 0, "lan", {}, {"condition": "c", "rep": 0})])
    events = []
    backend = Backend()
    driver = Driver(store, backend, {}, store.begin_session("run", "test", 1), 1,
                    on_event=lambda kind, data: events.append((kind, data)), run_dir=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        driver.run()
    kinds = [k for k, _ in events]
    assert kinds == ["lab_starting", "lab_up", "load", "stopping", "stop_waiting"], kinds
    assert events[3][1] == {"labs": ["s1-lab0"]}
    waiting = events[4][1]
    assert waiting["labs"] == [("s1-lab0", "node-a")] and 0 < waiting["left_s"] <= 2.0, waiting
    # Given up on at the deadline: aborted once more, the run's attempt left for a resume.
    assert backend.lab.aborted == 2
    assert [a["outcome"] for a in store.attempts()] == [None]


def test_a_run_that_ends_says_nothing_of_stopping(tmp_path):
    store = RunStore.create(tmp_path / "run")
    store.write_plan([Job("load0", 0, "lan", {}, {"condition": "c", "rep": 0})])
    events = []

    class Lab(SilentLab):
        def close(self):
            self.closed = True

    class Ends(Backend):
        def __init__(self):
            super().__init__()
            self.lab = Lab()

        def wait(self, labs, timeout):
            self.waits += 1
            if self.waits == 1:
                return [(self.lab, ("up", {"node": "node-a"}))]
            if self.waits == 2:
                return [(self.lab, ("result", {"key": "load0", "ok": True, "record": {}}))]
            return [(self.lab, ("closed", {}))]

    driver = Driver(store, Ends(), {}, store.begin_session("run", "test", 1), 1,
                    on_event=lambda kind, data: events.append((kind, data)), run_dir=tmp_path)
    driver.run()
    assert [k for k, _ in events] == ["lab_starting", "lab_up", "load", "done"]
