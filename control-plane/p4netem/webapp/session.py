"""The web server's two connections to the switch, shared by every request.

Writes (apply, set, reset, timelines) go through one primary Controller; reads (show, stats,
radio, metrics, the live stream) through a second, read-only one (no arbitration: it never
disturbs a controller), so the page keeps updating while a timeline holds the writer. A
Controller is not thread-safe and FastAPI runs plain endpoints on a thread pool: each connection
has its own lock. Stats come from a StatsPoller (control/stats_poller.py): per refresh one Read of
the counters that can have changed, the rules read again only after a write (ours at once,
another controller's within its layout check). A lost connection is re-opened on the next call (the switch may restart under
a long-running web server). Stats are cached for a fraction of the refresh period so that the
live stream and Prometheus scrapes at the same moment share one read of the switch; and a read
that took longer than that (about 3 s for 1000 rules on a loaded 2-core machine) stays fresh for as
long as it took, so the web server spends at most about half a core reading, however many clients
ask: the refresh period stretches instead (the live stream's timestamps say so).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ..control import Controller
from ..control.controller import SwitchStats
from ..control.stats_poller import StatsPoller
from ..p4rt import GrpcTls
from ..profiles import Profile, builtin_profiles

T = TypeVar("T")


class _Connection:
    def __init__(self, session: SwitchSession, primary: bool):
        self.session = session
        self.primary = primary
        self.lock = threading.RLock()
        self.ctl: Controller | None = None
        self.poller: StatsPoller | None = None  # the reader's: stats of this connection

    def get(self) -> Controller:
        if self.ctl is None or not self.ctl.client.connected:
            if self.ctl is not None:
                self.ctl.close()
                self.ctl = None
            s = self.session
            self.ctl = Controller.connect(s.address, device_id=s.device_id, election_id=s.election_id,
                                          primary=self.primary, timeout=s.timeout, tls=s.tls,
                                          profiles=list(s.uploaded.values()))
            self.poller = StatsPoller(self.ctl.session, self.ctl.readback)
        return self.ctl

    def close(self) -> None:
        with self.lock:
            if self.ctl is not None:
                self.ctl.close()
                self.ctl = None


class SwitchSession:
    def __init__(self, address: str, *, device_id: int = 1, election_id: int = 1, tls: GrpcTls | None = None,
                 timeout: float = 5.0, stats_max_age_s: float = 0.4):
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.tls = tls
        self.timeout = timeout
        self.stats_max_age_s = stats_max_age_s
        self.uploaded: dict[str, Profile] = {}
        self._writer = _Connection(self, primary=True)
        self._exclusive = False  # a timeline holds the writer
        self._reader = _Connection(self, primary=False)
        self._stats: tuple[float, SwitchStats] | None = None
        self._last_read_s = 0.0
        self.stats_reads = 0  # reads of the switch's counters (the cache's misses)

    def write(self, fn: Callable[[Controller], T], *, blocking: bool = True, exclusive: bool = False) -> T:
        """Run fn with the primary controller, after the writes before it. blocking=False raises
        BusyError while a timeline (a write with exclusive=True) holds it, rather than waiting
        for the timeline's end; two requests' writes at the same moment just take turns."""
        lock = self._writer.lock
        while not lock.acquire(timeout=0.05):
            if not blocking and self._exclusive:
                raise BusyError("a timeline is running: stop it first (DELETE /api/timelines)")
        if exclusive:
            self._exclusive = True
        try:
            return fn(self._writer.get())
        finally:
            if exclusive:
                self._exclusive = False
            self._stats = None  # what the counters show may have changed
            lock.release()
            self.rules_changed()

    def rules_changed(self) -> None:
        """Rules or profiles were written: the next stats read reads them again."""
        with self._reader.lock:
            if self._reader.poller is not None:
                self._reader.poller.invalidate()

    def read(self, fn: Callable[[Controller], T]) -> T:
        with self._reader.lock:
            return fn(self._reader.get())

    def stats(self) -> SwitchStats:
        with self._reader.lock:
            cached = self._stats
            if cached is not None and time.monotonic() - cached[0] < max(self.stats_max_age_s, self._last_read_s):
                return cached[1]
            t0 = time.monotonic()
            self._reader.get()
            poller = self._reader.poller
            assert poller is not None
            layouts = poller.layout_reads
            stats = poller.poll()
            # The duty-cycle cap follows the refreshes' own cost; a read that also read the rules
            # again (once, after a change) would otherwise keep the next counters stale as long.
            self._last_read_s = time.monotonic() - t0 if poller.layout_reads == layouts else 0.0
            self.stats_reads += 1
            self._stats = (time.monotonic(), stats)
            return stats

    def add_profile(self, profile: Profile) -> None:
        self.uploaded[profile.name] = profile
        for conn in (self._writer, self._reader):
            with conn.lock:
                if conn.ctl is not None:
                    conn.ctl.add_profile(profile)

    def known_profiles(self) -> dict[str, Profile]:
        return {**builtin_profiles(), **self.uploaded}

    def close(self) -> None:
        self._writer.close()
        self._reader.close()


class BusyError(RuntimeError):
    """The writer is held by a running timeline."""
