"""The web server's two connections to the switch, shared by every request.

Reads (show, stats, radio, metrics, the live stream) go through a read-only Controller (no
arbitration: it never disturbs a controller), so the page keeps updating while a timeline holds
the writer. Writes (apply, set, reset, self-service, timelines) go through a second Controller
whose connection has no stream between writes either: each write opens the StreamChannel,
arbitrates with --election-id, writes and closes the stream (Controller.primary_role); a timeline
holds it while it plays. So the web is a controller of the switch only while it writes, and the
CLI, or a `p4netem switch` service restarted under the web, writes with the same default election
id 1 in between (the web used to hold it for as long as it ran, and they exited 3: "election id 1
is already used by another controller"). A giant election id would not do: the switch keeps the
highest it has seen (P4Runtime), which would lock id-1 controllers out for good. A write while
another controller is primary, or holds our election id, waits for it up to primary_wait_s (web
--primary-wait, 2 s by default: a CLI command holds the role for well under a second), then
answers 409 naming it (NotPrimaryError).
The writer's channel stays open between writes: the stream costs a write about 2 ms, a new
connection about 8 ms. A Controller is not thread-safe and FastAPI runs plain endpoints on a
thread pool: each connection has its own lock. Stats come from a StatsPoller
(control/stats_poller.py): per refresh one Read of
the counters that can have changed, the rules read again only after a write (ours at once,
another controller's within its layout check). A lost connection is re-opened on the next call (the switch may restart under
a long-running web server). Stats are cached for a fraction of the refresh period so that the
live stream and Prometheus scrapes at the same moment share one read of the switch; and a read
that took longer than that (about 3 s for 1000 rules on a loaded 2-core machine) stays fresh for as
long as it took, so the web server spends at most about half a core reading, however many clients
ask: the refresh period stretches instead (the live stream's timestamps say so).

A switch that is down (stopped, not started yet, or not answering) is found out in about
CONNECT_TIMEOUT_S, not in a call's deadline: every (re)connection, the first and the one the
control session makes after a call met UNAVAILABLE, waits at most that long (the client's
connect_timeout), and the failure is remembered for RETRY_S: the requests that waited on the connection's lock meanwhile
(behind the live stream's attempt, typically) get it at once instead of each trying in turn (which
made every request of the page take two to three timeouts, 10 s and more). After RETRY_S the next
call tries again, so the connection is back within about a second of the switch; while it is up,
each connection is opened once and shared.

A switch frozen with the connections open (SIGSTOP, a hung host: its kernel keeps the TCP
connections and accepts new ones, but nothing answers) is found out almost as fast: both
connections send an HTTP/2 PING every KEEPALIVE_S (the client's keepalive_s) and drop the
connection when one is not answered within twice that. A call open on it then fails UNAVAILABLE
(not retried on a new connection: _Connection is the one that reconnects, the control session's
read_retry is off), where it waited for its deadline (`timeout`, 5 s), which a slow but answering
switch (a Read of 1000 rules on a loaded machine, about 3 s) still gets in full. A call on a
connection keepalive dropped while idle makes the channel connect again, and that attempt's
handshake is bounded by the same PINGs. Measured (tests/appliance/test_web_switch_frozen.py): the
first request after SIGSTOP answers 503 in 1.1-1.8 s (it took 5 s), the next ones within 2.3 s.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from ..control import Controller
from ..control.controller import SwitchStats
from ..control.primary_wait import WEB_WAIT_S, check_wait
from ..control.session import NoPipelineError
from ..control.stats_poller import StatsPoller
from ..p4rt import GrpcTls, P4Info, P4RuntimeError
from ..paths import p4info_path
from ..profiles import Profile, builtin_profiles

T = TypeVar("T")


# How long a (re)connection waits for the switch, and how long its failure is answered at once.
CONNECT_TIMEOUT_S = 2.0
RETRY_S = 1.0
# How often each connection checks that the switch still answers (an HTTP/2 PING; unanswered for
# twice this, the connection is dropped).
KEEPALIVE_S = 0.5
# A call that met these found no switch: the connection is closed (a dead switch's channel would
# otherwise keep backing off) and the failure remembered as a failed connection's is.
SWITCH_GONE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class _Connection:
    """One of the two connections; every use holds `lock`."""

    def __init__(self, session: SwitchSession, primary: bool):
        self.session = session
        self.primary = primary
        self.lock = threading.RLock()
        self.ctl: Controller | None = None
        self.poller: StatsPoller | None = None  # the reader's: stats of this connection
        self.failed: tuple[float, P4RuntimeError] | None = None  # (monotonic time, why) of the last failure

    def get(self) -> Controller:
        if self.ctl is not None and self.ctl.client.connected:
            return self.ctl
        self._drop()
        if self.failed is not None and time.monotonic() - self.failed[0] < self.session.retry_s:
            err = self.failed[1]
            raise P4RuntimeError(err.code, err.message)
        try:
            self.ctl = self.session.connect(self.primary)
        except P4RuntimeError as err:
            self.failed = (time.monotonic(), err)
            raise
        self.failed = None
        self.poller = StatsPoller(self.ctl.session, self.ctl.readback)
        return self.ctl

    def use(self, fn: Callable[[Controller], T]) -> T:
        """fn(controller); a switch found gone on the way closes the connection (see SWITCH_GONE)."""
        ctl = self.get()
        try:
            return fn(ctl)
        except P4RuntimeError as err:
            if err.code in SWITCH_GONE:
                self._drop()
                self.failed = (time.monotonic(), err)
            raise

    def _drop(self) -> None:
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
            self.poller = None

    def close(self) -> None:
        with self.lock:
            self._drop()


class SwitchSession:
    def __init__(self, address: str, *, device_id: int = 1, election_id: int = 1, tls: GrpcTls | None = None,
                 timeout: float = 5.0, connect_timeout: float = CONNECT_TIMEOUT_S, retry_s: float = RETRY_S,
                 stats_max_age_s: float = 0.4, keepalive_s: float | None = KEEPALIVE_S,
                 primary_wait_s: float = WEB_WAIT_S):
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.tls = tls
        self.timeout = timeout  # each call's deadline
        self.connect_timeout = connect_timeout
        self.keepalive_s = keepalive_s
        self.retry_s = retry_s
        self.stats_max_age_s = stats_max_age_s
        # How long a write waits for the primary role while another live controller holds it
        # (a CLI command writing) before NotPrimaryError, 409 (control/primary_wait.py).
        self.primary_wait_s = check_wait("primary_wait_s", primary_wait_s)
        self.uploaded: dict[str, Profile] = {}
        # Its connection has no stream between writes: write() takes the primary role for each.
        self._writer = _Connection(self, primary=True)
        self._exclusive = False  # a timeline holds the writer
        self._reader = _Connection(self, primary=False)
        self._stats: tuple[float, SwitchStats] | None = None
        self._last_read_s = 0.0
        self.stats_reads = 0  # reads of the switch's counters (the cache's misses)

    def write(self, fn: Callable[[Controller], T], *, blocking: bool = True, exclusive: bool = False) -> T:
        """Run fn as the primary controller, after the writes before it: the stream is opened and
        closed around it (NotPrimaryError if another controller still has the role or our
        election id after primary_wait_s). blocking=False raises BusyError while a timeline (a
        write with exclusive=True) holds it, rather than waiting for the timeline's end; two
        requests' writes at the same moment just take turns."""
        lock = self._writer.lock
        while not lock.acquire(timeout=0.05):
            if not blocking and self._exclusive:
                raise BusyError("a timeline is running: stop it first (DELETE /api/timelines)")
        if exclusive:
            self._exclusive = True

        def as_primary(ctl: Controller) -> T:
            with ctl.primary_role(self.primary_wait_s):
                return fn(ctl)
        try:
            return self._writer.use(as_primary)
        finally:
            if exclusive:
                self._exclusive = False
            self._stats = None  # what the counters show may have changed
            lock.release()
            self.rules_changed()

    @functools.cached_property
    def local_p4info(self) -> P4Info | None:
        """The contract (p4src/p4netem.p4info.txtpb), read once: pushed to a switch without a pipeline."""
        path = p4info_path()
        return P4Info.load(path) if path.exists() else None

    def connect(self, primary: bool) -> Controller:
        """A new controller, without a stream (write() arbitrates for each write): its
        (re)connections wait at most connect_timeout, its calls `timeout` unless a keepalive PING
        goes unanswered first. The writer (`primary`) of a switch without a pipeline (bmv2 before
        its first controller) connects as primary once to push it."""
        def connect(arbitrate: bool) -> Controller:
            return Controller.connect(self.address, device_id=self.device_id, election_id=self.election_id,
                                      primary=arbitrate, timeout=self.timeout, connect_timeout=self.connect_timeout,
                                      keepalive_s=self.keepalive_s, tls=self.tls, p4info=self.local_p4info,
                                      profiles=list(self.uploaded.values()))
        try:
            ctl = connect(False)
        except NoPipelineError:
            if not primary:
                raise
            ctl = connect(True)
            ctl.session.release_primary()
        # _Connection reconnects (and remembers a failure for retry_s): a read that met UNAVAILABLE
        # is answered as it is, not after a reconnection of the session's own.
        ctl.session.read_retry = False
        return ctl

    def rules_changed(self) -> None:
        """Rules or profiles were written: the next stats read reads them again."""
        with self._reader.lock:
            if self._reader.poller is not None:
                self._reader.poller.invalidate()

    def read(self, fn: Callable[[Controller], T]) -> T:
        with self._reader.lock:
            return self._reader.use(fn)

    def stats(self) -> SwitchStats:
        with self._reader.lock:
            cached = self._stats
            if cached is not None and time.monotonic() - cached[0] < max(self.stats_max_age_s, self._last_read_s):
                return cached[1]
            t0 = time.monotonic()

            def poll(_: Controller) -> tuple[SwitchStats, bool]:
                poller = self._reader.poller
                assert poller is not None
                layouts = poller.layout_reads
                return poller.poll(), poller.layout_reads != layouts
            stats, relaid = self._reader.use(poll)
            # The duty-cycle cap follows the refreshes' own cost; a read that also read the rules
            # again (once, after a change) would otherwise keep the next counters stale as long.
            self._last_read_s = 0.0 if relaid else time.monotonic() - t0
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
