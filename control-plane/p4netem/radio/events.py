"""Radio state changes, live: the switch reports every change of every UE's radio state with a
`radio_state_digest_t` digest (ue_id, old_state, new_state, timestamp_ns) on the P4Runtime
stream. Timer demotions are evaluated lazily by the data plane (when the UE's next packet
arrives) and reported then, with the time they took effect; a promotion reports its start and
its completion when it starts. So for each UE the events come in time order, each starting in
the state the previous one ended in, but a demotion may be reported late.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from .. import pipeline as pl
from ..p4rt import P4RuntimeClient, P4RuntimeError
from ..p4rt.client import Digest
from ..pipeline import RadioState

__all__ = ["RadioEvent", "RadioWatcher"]


def _state(value: int) -> RadioState | int:
    try:
        return RadioState(value)
    except ValueError:
        return value  # a reserved state value: keep the number rather than fail


@dataclass(frozen=True)
class RadioEvent:
    """One state change of one UE's radio, effective at `timestamp_ns` (the switch's clock)."""

    ue_id: int
    old: RadioState | int
    new: RadioState | int
    timestamp_ns: int

    @classmethod
    def from_digest_data(cls, data: dict[str, int]) -> "RadioEvent":
        return cls(data["ue_id"], _state(data["old_state"]), _state(data["new_state"]), data["timestamp_ns"])

    def __str__(self) -> str:
        name = lambda s: s.name if isinstance(s, RadioState) else str(s)  # noqa: E731
        return f"ue {self.ue_id}: {name(self.old)} -> {name(self.new)} at {self.timestamp_ns / 1e9:.6f} s"


class RadioWatcher:
    """Receives radio state changes through a connected P4Runtime client.

        with P4RuntimeClient(addr).connect() as client:
            client.fetch_pipeline()
            watcher = RadioWatcher(client).start()
            for event in watcher.events(timeout=5):
                print(event)

    `start()` enables the digest (DigestEntry; only the primary client may). Events are also
    kept per UE (`history`, `state_of`). Digests of other kinds that arrive meanwhile (MAC
    learning) are kept in `other` rather than dropped.
    """

    def __init__(self, client: P4RuntimeClient, max_timeout_ns: int = 1_000_000, max_list_size: int = 64):
        self.client = client
        self.max_timeout_ns = max_timeout_ns
        self.max_list_size = max_list_size
        self.history: dict[int, list[RadioEvent]] = defaultdict(list)
        self.other: list[Digest] = []

    def start(self) -> "RadioWatcher":
        # ack_timeout 0: never suppress a message as a duplicate (every event is distinct anyway).
        self.client.configure_digest(pl.RADIO_STATE_DIGEST, max_timeout_ns=self.max_timeout_ns,
                                     max_list_size=self.max_list_size, ack_timeout_ns=0)
        return self

    def stop(self) -> None:
        """Turn the digest off again (DELETE of its DigestEntry)."""
        from ..p4rt.proto import p4runtime_pb2

        entry = p4runtime_pb2.DigestEntry(digest_id=self.client.info.digest(pl.RADIO_STATE_DIGEST).id)
        self.client.delete(entry)

    def events(self, timeout: float | None = None, idle: float | None = None) -> Iterator[RadioEvent]:
        """Events as they arrive. Ends `timeout` seconds from now, or after `idle` seconds
        without any digest; with neither it runs until the caller stops iterating."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = idle
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                wait = left if wait is None else min(wait, left)
            try:
                digest = self.client.get_digest(timeout=wait)
            except P4RuntimeError:
                if deadline is None or time.monotonic() >= deadline or idle is not None:
                    return
                continue
            if digest.name != pl.RADIO_STATE_DIGEST:
                self.other.append(digest)
                continue
            for data in digest.data:
                event = RadioEvent.from_digest_data(data)
                self.history[event.ue_id].append(event)
                yield event

    def collect(self, timeout: float, idle: float | None = None) -> list[RadioEvent]:
        """Every event that arrives within `timeout` seconds (or until `idle` seconds pass without one)."""
        return list(self.events(timeout=timeout, idle=idle))

    def state_of(self, ue_id: int) -> RadioState | int | None:
        """The state the last reported event of `ue_id` left its radio in (None: no event yet).
        A timer demotion since then is only reported with the UE's next packet."""
        events = self.history.get(ue_id)
        return events[-1].new if events else None
