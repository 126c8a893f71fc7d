"""The radio around each load (E5).

Before the load: with the profile's radio applied, the client's radio is idled
(`MininetLab.reset_radio`: register writes equivalent to a demotion, p4netem/radio/idle.py), so
the load's first packet pays the whole promotion (IDLE -> connected), as after a long pause,
without waiting out the model's inactivity timers (14 s for HSPA). The pre-woken variant then
wakes it again with one small exchange just before the load (a DNS lookup through the lab's
resolver with --dns, else one ping to the first server), so the load finds the radio connected:
the difference between the two is what the wake-up costs a page.

During the load (`RadioLog`): the switch's own account of the client's radio: promotions counted
by `radio_promotions` for its UE, and the state changes its radio digests report (with the
promotion's real duration, spread included).

Without the radio applied (radio off, or a profile without one) there is nothing to do; the
record says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from p4netem.pipeline import RadioState
from p4netem.radio import RadioEvent, RadioWatcher, read_promotions

from ..mininet.slots import AppliedProfile


@dataclass(frozen=True)
class Wake:
    """The small exchange that wakes the radio before a pre-woken load."""

    kind: str          # "dns" | "ping"
    argv: list[str]    # run in the client's namespace; returns when the answer arrived


def wake_exchange(lab, dns_name: str | None = None) -> Wake:
    """A name lookup through the lab's resolver (one DNS query and its answer) when the run
    resolves names with DNS (`dns_name`: a name the resolver knows), else one ping to the first
    server. Either is a packet or two: the radio promotes on any packet."""
    if dns_name:
        return Wake("dns", ["getent", "ahostsv4", dns_name])
    return Wake("ping", ["ping", "-n", "-c", "1", "-W", "20", lab.ip(lab.topology.servers[0].name)])


@dataclass(frozen=True)
class RadioPrep:
    idle: str                          # "n/a" | "reset"
    idled: tuple[dict, ...] = ()       # what idling did, per UE (IdledUe.to_json)
    prewake: str = ""                  # "" | Wake.kind
    prewake_ms: float | None = None    # the wake exchange's round trip (promotion + RTT)

    def to_json(self) -> dict:
        return {"idle": self.idle, "idled": list(self.idled), "prewake": self.prewake,
                "prewake_ms": None if self.prewake_ms is None else round(self.prewake_ms, 3)}


def prepare_radio(lab, applied: AppliedProfile, *, client: str | None = None,
                  wake: Wake | None = None) -> RadioPrep:
    """Idle the radio of `applied`'s slot; then, with `wake`, wake it from `client` (default:
    the topology's first client)."""
    if not applied.radio.applied:
        return RadioPrep("n/a")
    idled = tuple(r.to_json() for r in lab.reset_radio(applied.slot))
    if wake is None:
        return RadioPrep("reset", idled)
    t0 = time.monotonic()
    lab.run(client or lab.topology.clients[0].name, wake.argv, timeout=60)
    return RadioPrep("reset", idled, wake.kind, (time.monotonic() - t0) * 1000)


class RadioLog:
    """Promotions and radio state changes of the slot's UEs over one load (begin .. end)."""

    def __init__(self, lab):
        self.lab = lab
        self._watcher: RadioWatcher | None = None
        self._ues: tuple[int, ...] = ()
        self._before: dict[int, dict] = {}
        self._t0_ns = 0

    def begin(self, applied: AppliedProfile) -> None:
        """Just before the load: count from here; earlier digests (the idle's or the pre-wake's
        changes) are not the load's."""
        self._ues = applied.ues if applied.radio.applied else ()
        if not self._ues:
            return
        if self._watcher is None:
            # Digests go to the primary client, which the lab's is.
            self._watcher = RadioWatcher(self.lab.client).start()
        self._watcher.collect(timeout=1.0, idle=0.05)
        self._before = read_promotions(self.lab.client, self._ues)
        self._t0_ns = time.monotonic_ns()

    def end(self) -> dict:
        """Right after the load: {"promotions": n, "promotions_by_kind": {...}, "wake_ms": the
        first promotion's duration from its digests (None without one), "events": [...]} ({}
        without a radio)."""
        if not self._ues:
            return {}
        assert self._watcher is not None
        after = read_promotions(self.lab.client, self._ues)
        kinds: dict[str, int] = {}
        for ue in self._ues:
            for kind, n in after[ue].items():
                if n - self._before[ue].get(kind, 0):
                    kinds[kind.name] = kinds.get(kind.name, 0) + n - self._before[ue].get(kind, 0)
        events = [e for e in self._watcher.collect(timeout=1.0, idle=0.1) if e.ue_id in self._ues]
        return {"promotions": sum(kinds.values()), "promotions_by_kind": kinds,
                "wake_ms": _first_wake_ms(events),
                "events": [_event_json(e, self._t0_ns) for e in events]}


def _first_wake_ms(events: list[RadioEvent]) -> float | None:
    """The first promotion's duration: from `old -> PROMOTING` to `PROMOTING -> target` (both
    reported when it starts, with their times)."""
    for start, done in zip(events, events[1:]):
        if start.new == RadioState.PROMOTING and done.old == RadioState.PROMOTING:
            return (done.timestamp_ns - start.timestamp_ns) / 1e6
    return None


def _event_json(e: RadioEvent, t0_ns: int) -> dict:
    name = lambda s: s.name if isinstance(s, RadioState) else s  # noqa: E731
    # The switch's clock is CLOCK_MONOTONIC of this host (p4netem-switch): times from the load's start.
    return {"ue": e.ue_id, "old": name(e.old), "new": name(e.new),
            "t_ms": round((e.timestamp_ns - t0_ns) / 1e6, 3)}
