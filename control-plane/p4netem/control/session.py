"""The controller's connection to one switch: the P4Runtime client, the pipeline it runs, and the
one read path and one write path every other part of the controller goes through.

Reads retry once after a reconnect (they are idempotent); writes use the strongest atomicity the
target offers and fall back only on UNIMPLEMENTED; every failure is explained in a plain sentence
(not primary, unreachable, which update of a batch failed and why).
"""

from __future__ import annotations

import logging
import threading

import grpc

from .. import pipeline as pl
from ..p4rt import P4Info, P4RuntimeClient, P4RuntimeError, WriteError
from ..paths import p4info_path
from .primary_wait import RoleWait, check_wait, election_id_in_use
from .rollback import record as record_for_rollback, revert_updates
from .state import SwitchState, read_state

log = logging.getLogger(__name__)

__all__ = ["Session", "NotPrimaryError", "NoPipelineError", "ATOMICITY", "check_atomicity"]

# Write atomicity modes, strongest first.
ATOMICITY = ("DATAPLANE_ATOMIC", "ROLLBACK_ON_ERROR", "CONTINUE_ON_ERROR")


class NotPrimaryError(P4RuntimeError):
    """acquire_primary() found the role taken: another controller is primary, or is connected with
    our election id. `holder`: that controller's election id (None when nobody is primary and the
    switch only remembers a higher one)."""

    def __init__(self, code: grpc.StatusCode, message: str, holder: int | None):
        super().__init__(code, message)
        self.holder = holder


class NoPipelineError(P4RuntimeError):
    """The switch has no pipeline and this connection, not being primary, cannot push it."""


def check_atomicity(max_atomicity: str) -> None:
    if max_atomicity not in ATOMICITY:
        raise ValueError(f"max_atomicity must be one of {', '.join(ATOMICITY)}, not {max_atomicity!r}")


class Session:
    """One client of one switch, with the local contract P4Info (None: none found)."""

    def __init__(self, client: P4RuntimeClient, *, owns_client: bool = False,
                 max_atomicity: str = "DATAPLANE_ATOMIC", local_p4info: P4Info | None = None):
        check_atomicity(max_atomicity)
        self.client = client
        self.owns_client = owns_client
        # The strongest Write atomicity the target offers. p4netem-switch has all three; a target
        # that has only CONTINUE_ON_ERROR (bmv2's P4Runtime server) is told so up front instead
        # of being asked for more on every write (write() still falls back on UNIMPLEMENTED).
        self.max_atomicity = max_atomicity
        self.local_p4info = local_p4info
        # close()d: calls fail instead of opening a new connection behind the caller's back (a
        # channel and stream thread nobody closes, and a primary elected again after it left).
        self.closed = False
        # One controller may be used from several threads: every read-modify-write (apply, set,
        # remove, reset, forwarding) and every reconnection holds this lock, so two of them
        # never pick the same free profile ids or rule number from one snapshot.
        self.lock = threading.RLock()
        # Profile ids and rule numbers of prepared switches not yet committed (their spare ids
        # and rule numbers are not visible on the switch until the flip): never handed out twice.
        self.reserved_ids: set[int] = set()
        self.reserved_numbers: set[int] = set()
        # The connection (client.generation) whose pipeline was checked by a primary (VERIFY, or
        # pushed to a switch without one): acquire_primary() checks it once per connection.
        self.checked_generation: int | None = None
        # Whether a read that met UNAVAILABLE reconnects and runs once more (read()). A caller with
        # a reconnection policy of its own turns it off: the web server (webapp/session.py) drops
        # the connection and answers the requests behind it at once; a retry there made a switch
        # that stopped answering (SIGSTOP) cost a request two waits, keepalive's and a connect's.
        self.read_retry = True

    @property
    def info(self) -> P4Info:
        return self.client.info

    @property
    def ue_ids(self) -> int:
        """How many UEs the switch holds radio state for (p4netem-switch --ue-ids): the size of
        its per-UE registers in the P4Info it reports."""
        return self.client.info.register(pl.RADIO_STATE).size

    @property
    def is_primary(self) -> bool:
        return self.client.is_primary

    @property
    def address(self) -> str:
        return self.client.address

    def close(self) -> None:
        if self.owns_client:
            self.closed = True
            self.client.close()

    # ---- connection and pipeline ------------------------------------------------------------------

    def reconnect(self, election_id: int | None = None) -> None:
        """Reconnect and re-run arbitration (with a new election id if given); also opens a
        closed controller again."""
        with self.lock:
            self.closed = False
            self.client.reconnect(election_id=election_id)
            self.adopt_pipeline()

    def ensure_connected(self) -> None:
        if self.closed:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"this controller of the switch at {self.address} was closed; "
                                 "connect again (Controller.connect) or call reconnect()")
        if not self.client.connected:
            with self.lock:
                if not self.client.connected:  # another thread may have reconnected meanwhile
                    log.info("connection to %s lost; reconnecting", self.address)
                    self.reconnect()

    def adopt_pipeline(self) -> None:
        """Use the switch's P4Info; push ours if it has none; verify ours matches if we can."""
        info, _, _ = self.client.get_pipeline("P4INFO_AND_COOKIE")
        if info is None:
            if self.local_p4info is None:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"the switch at {self.address} has no pipeline and no local P4Info was found")
            if not self.is_primary:
                raise NoPipelineError(grpc.StatusCode.FAILED_PRECONDITION, f"the switch at {self.address} has "
                                      "no pipeline; a primary controller must push it")
            self.client.set_pipeline(self.local_p4info, action="VERIFY_AND_COMMIT")
        else:
            self.client.p4info = info
            if self.is_primary and self.local_p4info is not None:
                self.verify_pipeline()
        self.client.p4info = info or self.local_p4info
        if self.is_primary:
            self.checked_generation = self.client.generation

    def acquire_primary(self, wait: float = 0.0) -> None:
        """Become the primary for a while, on a connection opened without a stream: open the
        StreamChannel and arbitrate with our election id (release_primary() closes it again). So
        a long-running process (the web server) is a controller of the switch only while it
        writes, and other controllers with the same election id (the CLI's default, 1) write in
        between. The role taken meanwhile raises NotPrimaryError, naming the holder's election
        id, and leaves the connection without a stream. `wait` (seconds, 0: none): while another
        live controller holds the role (has our election id, or a higher one is primary), try
        again until then (primary_wait.py), holding no stream in between; the error then says
        how long it waited. The pipeline is checked (VERIFY, or pushed to a switch without one)
        on the first acquisition on each connection."""
        waiting = RoleWait(check_wait("wait", wait))
        while True:
            try:
                return self._acquire_once()
            except NotPrimaryError as err:
                # holder None: nobody is primary, our id is below the highest the switch keeps
                # for as long as it runs: no wait changes that.
                if err.holder is None or not waiting.pause(err.message):
                    raise NotPrimaryError(err.code, err.message + waiting.note(), holder=err.holder) from None

    def _acquire_once(self) -> None:
        with self.lock:
            self.ensure_connected()
            c = self.client
            wait = c.timeout if c.connect_timeout is None else c.connect_timeout
            try:
                # A stream already open (connected with primary=True): arbitrate on it again.
                primary = c.arbitrate(timeout=wait) if c.arbitrating else c.open_stream(timeout=wait)
            except P4RuntimeError as err:
                if not election_id_in_use(err):
                    raise self.explain(err, "become the primary controller") from None
                # The switch refused the election id: a live controller has it (p4netem-switch:
                # "election id N is already used by another controller ...").
                raise NotPrimaryError(err.code, f"cannot become the primary controller of device {c.device_id} "
                                      f"at {c.address}: another controller is connected with our election id "
                                      f"{c.election_id} (the switch said: {err.message}); try again once it has "
                                      "finished", holder=c.election_id) from None
            if not primary:
                highest, present = c.primary_election_id, c.primary_present
                c.release()
                if present:
                    why = f"the controller with election id {highest} is the primary (ours is {c.election_id})"
                else:
                    why = (f"no controller is primary, but our election id {c.election_id} is below the highest "
                           f"the switch has seen, {highest} (it keeps it for as long as it runs)")
                raise NotPrimaryError(grpc.StatusCode.PERMISSION_DENIED, f"cannot become the primary controller "
                                      f"of device {c.device_id} at {c.address}: {why}",
                                      holder=highest if present else None)
            try:
                if self.checked_generation != c.generation:
                    self.adopt_pipeline()
            except BaseException:
                self.release_primary()
                raise

    def arbitrate_waiting(self, wait: float) -> bool:
        """Open the stream on a connection without one and arbitrate (Controller.connect with a
        primary_wait); while another live controller holds the role, close the stream and try
        again, for up to `wait` seconds (primary_wait.py). The last answer stands as without a
        wait: our election id still in use raises the switch's refusal, saying how long we
        waited; a backup keeps its stream and returns False. Returns is_primary."""
        c = self.client
        timeout = c.timeout if c.connect_timeout is None else c.connect_timeout
        waiting = RoleWait(wait)
        while True:
            try:
                if c.open_stream(timeout=timeout):
                    return True
            except P4RuntimeError as err:  # open_stream left no stream behind
                if not election_id_in_use(err):
                    raise
                if not waiting.pause(err.message):
                    raise P4RuntimeError(err.code, err.message + waiting.note()) from None
                continue
            if not c.primary_present or waiting.left <= 0:
                return False
            why = f"the controller with election id {c.primary_election_id} is the primary (ours is {c.election_id})"
            c.release()
            waiting.pause(why)

    def release_primary(self) -> None:
        """Close the stream acquire_primary() opened: the switch forgets this controller (its
        primary leaves; the next controller with an election id at least the highest seen takes
        over by asking), keeping the channel for reads and the next acquire_primary()."""
        with self.lock:
            if self.client.arbitrating:
                self.client.release()

    def verify_pipeline(self, p4info: P4Info | None = None) -> None:
        """Ask the switch whether it runs the pipeline of `p4info` (default: the local contract):
        SetForwardingPipelineConfig VERIFY. Raises INVALID_ARGUMENT naming the first difference."""
        p4info = p4info or self.local_p4info
        if p4info is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "no local P4Info to verify against")
        running = self.client.p4info
        if running is not None:
            p4info = sized_like(p4info, running)
        try:
            self.client.set_pipeline(p4info, action="VERIFY")
        except P4RuntimeError as err:
            raise P4RuntimeError(err.code, f"the switch's pipeline does not match {p4info_path().name}: "
                                 f"{err.message}") from None
        finally:
            self.client.p4info = running or p4info

    def push_pipeline(self, p4info: P4Info | None = None, keep_state: bool = True) -> None:
        """Push the pipeline: RECONCILE_AND_COMMIT keeps tables and counters; keep_state=False
        (VERIFY_AND_COMMIT) clears every table, register and counter."""
        p4info = p4info or self.local_p4info
        if p4info is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "no local P4Info to push")
        self.ensure_connected()
        action = "RECONCILE_AND_COMMIT" if keep_state else "VERIFY_AND_COMMIT"
        try:
            self.client.set_pipeline(p4info, action=action)
        except P4RuntimeError as err:
            raise self.explain(err, "push the pipeline") from None

    # ---- reads and writes -------------------------------------------------------------------------

    def state(self) -> SwitchState:
        """The raw snapshot (classifier, profile and radio tables, port map) sorted into managed rules."""
        self.ensure_connected()
        return self.read(lambda: read_state(self.client))

    def read(self, fn):
        """Run a read; on UNAVAILABLE reconnect once and retry (reads are idempotent). When another
        thread has reconnected since the read started, only retry (its connection is the new one)."""
        generation = self.client.generation
        try:
            return fn()
        except P4RuntimeError as err:
            # FAILED_PRECONDITION "client is not connected": another thread's reconnection had
            # closed the connection; it is retried once that reconnection is done.
            if err.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION) \
                    or not self.read_retry:
                raise self.explain(err, "read") from None
            with self.lock:  # waits for a reconnection in progress
                if self.client.generation != generation and self.client.connected:
                    pass  # another thread reconnected meanwhile: retry on its connection
                elif err.code == grpc.StatusCode.UNAVAILABLE:
                    self.reconnect()
                elif not self.client.connected:
                    # Another thread's reconnection failed: the switch is away.
                    raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, f"cannot read: the switch at {self.address} "
                                         f"is unreachable (the connection was lost; reconnecting failed)") from None
                else:
                    raise self.explain(err, "read") from None
            return fn()

    def write(self, updates: list, what: str, atomic: bool, rollback: bool = False) -> None:
        """One Write. atomic: DATAPLANE_ATOMIC (table entries only; seen whole by the data plane);
        rollback: ROLLBACK_ON_ERROR (all or nothing). Falls back to weaker atomicity only when the
        target says UNIMPLEMENTED; where only CONTINUE_ON_ERROR is left, an atomic or rollback
        write is made all or nothing by the controller (rollback.py)."""
        if not updates:
            return
        rollback_wanted = rollback
        modes = ["DATAPLANE_ATOMIC", "ROLLBACK_ON_ERROR"] if atomic else (["ROLLBACK_ON_ERROR"] if rollback else [])
        modes.append("CONTINUE_ON_ERROR")
        modes = [m for m in modes if ATOMICITY.index(m) >= ATOMICITY.index(self.max_atomicity)]
        for mode in modes:
            # All or nothing asked of a target that has only CONTINUE_ON_ERROR: the controller
            # records what the batch touches and reverts what was applied if any update fails.
            recorded = record_for_rollback(self.client.read, updates) \
                if mode == "CONTINUE_ON_ERROR" and (atomic or rollback_wanted) else None
            try:
                self.client.write(updates, atomicity=mode)
                return
            except WriteError as err:
                if err.code == grpc.StatusCode.UNIMPLEMENTED and mode != "CONTINUE_ON_ERROR":
                    log.warning("%s: the switch does not support %s; trying a weaker atomicity", what, mode)
                    # Learned once: the target's capability, not its name, sets what is asked.
                    self.max_atomicity = ATOMICITY[ATOMICITY.index(mode) + 1]
                    continue
                explained = self.explain(err, what)
                if recorded is not None:
                    revert_updates(lambda undo: self.client.write(undo, atomicity="CONTINUE_ON_ERROR"),
                                            recorded, err)
                raise explained from None

    def explain(self, err: P4RuntimeError, what: str) -> P4RuntimeError:
        """The same error with a plain sentence for the cases users hit."""
        c = self.client
        if err.code == grpc.StatusCode.PERMISSION_DENIED:
            highest = c.primary_election_id
            seen = f"; the switch's highest election id is {highest}" if highest is not None else ""
            if c.arbitrating is False:
                # No stream, no election: no election id makes it primary.
                msg = (f"cannot {what}: this is a read-only connection to device {c.device_id} at {c.address} "
                       f"(Controller.connect(..., primary=False): no arbitration), which cannot write; "
                       f"connect with primary=True to write. Switch said: {err.message}")
            else:
                msg = (f"cannot {what}: this controller is not the primary of device {c.device_id} at {c.address} "
                       f"(our election id {c.election_id}{seen}); use a higher election id to take over. "
                       f"Switch said: {err.message}")
            return WriteError(err.code, msg, getattr(err, "errors", []), detail=False) \
                if isinstance(err, WriteError) else P4RuntimeError(err.code, msg)
        if err.code == grpc.StatusCode.UNAVAILABLE:
            return P4RuntimeError(err.code, f"cannot {what}: the switch at {c.address} is unreachable ({err.message})")
        if isinstance(err, WriteError) and err.errors:
            # A batch error is UNKNOWN with one status per update; the others of an atomic batch
            # are ABORTED. Report the updates that failed for a reason, with the first one's code.
            real = [e for e in err.errors if e.code != grpc.StatusCode.ABORTED] or err.errors
            code = real[0].code if err.code == grpc.StatusCode.UNKNOWN else err.code
            detail = "; ".join(f"{e.message} (update {e.index}: {e.code.name})" for e in real[:3])
            more = f" (+{len(real) - 3} more)" if len(real) > 3 else ""
            return WriteError(code, f"cannot {what}: {detail}{more}", err.errors, detail=False)
        return P4RuntimeError(err.code, f"cannot {what}: {err.message}")


def sized_like(contract: P4Info, running: P4Info) -> P4Info:
    """The contract with each table, register and counter size capped at the running switch's:
    a switch started with smaller capacities (--classifier-entries, --profiles) runs the same
    pipeline, and VERIFY refuses sizes larger than the target's."""
    from ..p4rt.proto import p4info_pb2

    msg = p4info_pb2.P4Info()
    msg.CopyFrom(contract.message)
    sizes = {o.preamble.id: o.size for kind in ("tables", "registers", "counters")
             for o in getattr(running.message, kind)}
    for kind in ("tables", "registers", "counters"):
        for obj in getattr(msg, kind):
            if obj.preamble.id in sizes and 0 < sizes[obj.preamble.id] < obj.size:
                obj.size = sizes[obj.preamble.id]
    return P4Info(msg)
