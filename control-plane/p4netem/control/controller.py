"""The controller: connect to a p4netem switch and apply named profiles to rules, atomically.

    from p4netem.control import Controller, Rule

    with Controller.connect("127.0.0.1:9559", election_id=1) as ctl:
        ctl.bump_in_the_wire(1, 2)                      # port 1 <-> port 2
        ctl.apply("hspa")                               # all traffic between ports 1 and 2
        ctl.apply("lte-200ms", [Rule.parse({"client": "10.0.0.2", "ue": 2})])
        ctl.apply("lte")                                # atomic switch of the first rule
        ctl.set({"downlink.rate": "1Mbit"})             # in place: the same queue carries on
        for row in ctl.stats().rows: ...

How a profile is applied (docs/control.md has the details):
  1. everything is validated first (profile, rules, encodings): bad input raises ProfileError or
     RuleError and nothing is written;
  2. write A (ROLLBACK_ON_ERROR): the new parameters go under the rule's *spare* profile id, whose
     rate/delay/loss-model registers are reset (no classifier entry points at it yet);
  3. write B (DATAPLANE_ATOMIC): the classifier entries of every rule flip to the spare id. The
     switch publishes a batch as one snapshot, so every packet is classified either before (old
     profile, old id) or after (new profile, new id): no packet sees a mix, and both directions
     change together;
  4. write C: the old id's profile entries are deleted; the old id becomes the spare.
  If write B fails, write A is undone. An in-place change (set(), apply(in_place=True)) is
  only a write B that MODIFYs the entries the rule points at: no register is reset. Each rule owns its two ids for its lifetime, so its
  counters (summed over both ids) are cumulative across switches.

Every failure is a P4RuntimeError (`.code`: the gRPC status, `.message`: a plain sentence), or a
ProfileError/RuleError for bad input.
"""


from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..p4rt import GrpcTls, P4Info, P4RuntimeClient
from ..paths import p4info_path
from ..profiles import Profile
from ..profiles.distribution import DistTable
from ..profiles.link import JitterDistribution, TracePlacement
from ..radio.idle import IdledUe
from .catalog import ProfileCatalog, profile_differences, resolve_profile
from .distributions import Distributions
from .forwarding import Forwarding
from .radio_view import DEFAULT_LIMIT, SCAN_LIMIT, RadioReport
from .readback import AppliedRule, LinkStats, Readback, SwitchStats
from .rules import Rule
from .primary_wait import check_wait
from .session import Session, check_atomicity
from .state import ManagedRule, SwitchState
from .switching import DEFAULT_RULE, ApplyResult, ProfileSwitch, ProfileSwitching
from .trace_tables import TraceTables

if TYPE_CHECKING:  # traces and timelines (their pydantic models) only for the callers that load one
    from .trace import MahimahiTrace

__all__ = ["Controller", "AppliedRule", "ApplyResult", "ProfileSwitch", "LinkStats", "SwitchStats",
           "DEFAULT_RULE", "resolve_profile", "profile_differences"]

# A list of rules (Rule, mapping or "key=value,..." string), or one of them alone.
Rules = Sequence[Rule | Mapping | str] | Rule | Mapping | str


class Controller:
    """A controller of one p4netem switch (see the module docstring): a front over its parts,
    each usable on its own —
      session      the client, the pipeline, the one read and write path (session.py)
      catalog      the profiles known by name (catalog.py)
      forwarding   port map and L2 entries (forwarding.py)
      switching    apply / set / prepare+commit, remove, reset (switching.py)
      readback     applied rules, statistics, radio (readback.py)
      distributions  the jitter tables of dist_table (distributions.py)
      traces       Mahimahi traces in the trace registers, for exact delivery (trace_tables.py)"""

    def __init__(self, client: P4RuntimeClient, *, profiles: Iterable[Profile] = (), owns_client: bool = False,
                 max_atomicity: str = "DATAPLANE_ATOMIC"):
        self.session = Session(client, owns_client=owns_client, max_atomicity=max_atomicity)
        self.catalog = ProfileCatalog(profiles)
        self.forwarding = Forwarding(self.session)
        self.readback = Readback(self.session, self.catalog)
        self.switching = ProfileSwitching(self.session, self.catalog, self.readback)
        self.distributions = Distributions(self.session)
        self.traces = TraceTables(self.session)

    # ---- connection -------------------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        address: str = "127.0.0.1:9559",
        *,
        device_id: int = 1,
        election_id: int = 1,
        role: str = "",
        primary: bool = True,
        p4info: str | Path | P4Info | None = None,
        timeout: float = 10.0,
        profiles: Iterable[Profile] = (),
        max_atomicity: str = "DATAPLANE_ATOMIC",
        tls: GrpcTls | None = None,
        connect_timeout: float | None = None,
        keepalive_s: float | None = None,
        primary_wait: float = 0.0,
    ) -> Controller:
        """Connect to a switch. With primary=True (the default) run arbitration with `election_id`;
        the controller can write only if it became primary (`is_primary`). With primary=False
        open a read-only connection (no stream, no election: never disturbs other controllers).

        The switch's pipeline is checked against `p4info` (default: p4src/p4netem.p4info.txtpb);
        a switch without a pipeline gets it pushed (primary only). `tls`: see P4RuntimeClient (None:
        from the environment, plaintext if it names nothing). `timeout` is each call's deadline,
        `connect_timeout` how long this and every reconnection wait for the switch (None: `timeout`),
        seconds in 0 < s <= 86400 (else a ValueError naming the argument). `keepalive_s` (None: off):
        an HTTP/2 PING every keepalive_s seconds, so a switch frozen with the connection open is
        found out within about 3 * keepalive_s rather than a call's deadline. `primary_wait` (seconds,
        0: none; with primary=True): while another live controller holds the role (our election id,
        or a higher one primary), try again for up to that long (primary_wait.py); then as without
        a wait: a backup is returned, our election id still in use raises, saying how long."""
        # Bad arguments fail before anything is opened. A P4Info file given is read (a missing
        # one is an error: nothing would be verified); the default one only if it exists.
        check_atomicity(max_atomicity)
        primary_wait = check_wait("primary_wait", primary_wait)
        profiles = list(profiles)
        if isinstance(p4info, P4Info):
            local: P4Info | None = p4info
        elif p4info:
            local = P4Info.load(p4info)
        else:
            local = P4Info.load(p4info_path()) if p4info_path().exists() else None
        client = P4RuntimeClient(address, device_id=device_id, election_id=election_id, role=role, timeout=timeout,
                                 tls=tls, connect_timeout=connect_timeout, keepalive_s=keepalive_s)
        waits = primary and primary_wait > 0
        client.connect(arbitrate=primary and not waits)  # a wait opens the stream itself
        try:
            ctl = cls(client, profiles=profiles, owns_client=True, max_atomicity=max_atomicity)
            ctl.session.local_p4info = local
            if waits:
                ctl.session.arbitrate_waiting(primary_wait)
            ctl.session.adopt_pipeline()
        except BaseException:
            client.close()
            raise
        return ctl

    @property
    def client(self) -> P4RuntimeClient:
        return self.session.client

    @property
    def max_atomicity(self) -> str:
        return self.session.max_atomicity

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_primary(self) -> bool:
        return self.session.is_primary

    @property
    def primary_present(self) -> bool | None:
        """Whether the switch has a primary controller for our device and role, as its last
        arbitration message to us said (False after the primary left: nobody is promoted, a
        backup must reconnect with a higher election id); None on a read-only connection
        (primary=False: no stream, so the switch tells it nothing) or before any answer."""
        return self.client.primary_present

    @property
    def primary_election_id(self) -> int | None:
        """The highest election id the switch reported in its last arbitration message to us
        (the primary's, or the highest seen when there is none); None as for primary_present."""
        return self.client.primary_election_id

    @property
    def address(self) -> str:
        return self.session.address

    @property
    def ue_ids(self) -> int:
        return self.session.ue_ids

    def reconnect(self, election_id: int | None = None) -> None:
        self.session.reconnect(election_id)

    @contextlib.contextmanager
    def primary_role(self, wait: float = 0.0) -> Iterator[Controller]:
        """`with ctl.primary_role(): ctl.apply(...)`: primary only for the block, on a controller
        connected with primary=False (Session.acquire_primary: NotPrimaryError, naming the
        holder's election id, when another controller has the role or our election id, after
        trying again for up to `wait` seconds); the switch forgets this controller when the block
        ends, so others with the same election id write in between (`p4netem web`)."""
        self.session.acquire_primary(wait)
        try:
            yield self
        finally:
            self.session.release_primary()

    def verify_pipeline(self, p4info: P4Info | None = None) -> None:
        self.session.verify_pipeline(p4info)

    def push_pipeline(self, p4info: P4Info | None = None, keep_state: bool = True) -> None:
        self.session.push_pipeline(p4info, keep_state)

    def reset_hard(self, port_map: bool = False) -> None:
        """Re-push the pipeline with VERIFY_AND_COMMIT (every table, register and counter cleared,
        the jitter tables and the seed too), then write the forwarding back (the port map and the
        L2 entries, as they were), unless `port_map`: like reset(), a hard reset leaves the wire
        up. Between the two writes (milliseconds) nothing is forwarded. Entries whose action is
        not a port (none of p4netem's own) are not written back."""
        with self.session.lock:  # one unit for the other threads of this controller
            before = None if port_map else self.state()
            self.push_pipeline(keep_state=False)
            if before is None:
                return
            ports = {k: v for k, v in before.port_map.items() if isinstance(v, int)}
            macs = {k: v for k, v in before.l2.items() if isinstance(v, int)}
            if ports:
                self.set_port_map(ports)
            if macs:
                self.set_l2_forwarding(macs)

    # ---- profiles known by name -------------------------------------------------------------------

    def add_profile(self, profile: Profile) -> None:
        self.catalog.add(profile)

    @property
    def known_profiles(self) -> dict[str, Profile]:
        return self.catalog.known

    def resolve_profile(self, profile: Profile | str | Path) -> Profile:
        return self.catalog.resolve(profile)

    # ---- forwarding -------------------------------------------------------------------------------

    def set_port_map(self, mapping: Mapping[int, int]) -> None:
        self.forwarding.set_port_map(mapping)

    def set_l2_forwarding(self, mapping: Mapping[str | int, int]) -> None:
        self.forwarding.set_l2_forwarding(mapping)

    def bump_in_the_wire(self, port_a: int = 1, port_b: int = 2) -> None:
        self.forwarding.bump_in_the_wire(port_a, port_b)

    def port_map(self) -> dict[int, int | str]:
        return self.forwarding.port_map()

    # ---- profile switching and in-place changes ---------------------------------------------------

    def apply(self, profile: Profile | str | Path, rules: Rules | None = None, *,
              in_place: bool = False) -> ApplyResult:
        return self.switching.apply(profile, rules, in_place=in_place)

    def apply_many(self, assignments: Sequence[tuple[Rule | Mapping | str, Profile | str | Path]], *,
                   in_place: bool = False) -> ApplyResult:
        return self.switching.apply_many(assignments, in_place=in_place)

    def set(self, changes: Mapping[str, object], rules: Rules | None = None, *,
            in_place: bool = True) -> ApplyResult:
        return self.switching.set(changes, rules, in_place=in_place)

    def prepare(self, assignments: Sequence[tuple[Rule | Mapping | str, Profile | str | Path]], *,
                in_place: bool = False) -> ProfileSwitch:
        return self.switching.prepare(assignments, in_place=in_place)

    def parse_rules(self, rules: Rules | None) -> list[Rule]:
        return self.switching.parse_rules(rules)

    def remove(self, rules: Rules) -> int:
        return self.switching.remove(rules)

    def reset(self, port_map: bool = False) -> None:
        self.switching.reset(port_map)

    def run_timeline(self, timeline, rules: Rules | None = None, *,
                     lead_s: float = 0.2, on_event=None, rt_priority: int = 4, stop=None):
        """Run a Timeline (or a path to its YAML) on `rules` (default: the timeline's own rules,
        else DEFAULT_RULE). Everything is validated before the first write; returns a
        TimelineResult with the time error of every change. Ctrl-C stops it (result.interrupted)
        and leaves the switch on the last profile applied; so does setting `stop` (a
        threading.Event) from another thread."""
        from .timeline import Timeline, TimelinePlayer

        if not isinstance(timeline, Timeline):
            timeline = Timeline.load(timeline)
        parsed = self.parse_rules(rules) if rules else None
        return TimelinePlayer(self, timeline, parsed, lead_s=lead_s, on_event=on_event,
                              rt_priority=rt_priority, stop=stop).run()

    def check_timeline(self, timeline, rules: Rules | None = None) -> None:
        """What run_timeline checks before its first write (profiles known, a base profile on the
        rule when the timeline starts without `apply`), without running it: raises TimelineError."""
        from .timeline import TimelinePlayer

        TimelinePlayer(self, timeline, self.parse_rules(rules) if rules else None).compile()

    # ---- reading back and statistics --------------------------------------------------------------

    def state(self) -> SwitchState:
        return self.readback.state()

    def applied(self) -> list[AppliedRule]:
        return self.readback.applied()

    def applied_rule(self, managed: ManagedRule, state: SwitchState) -> AppliedRule:
        return self.readback.applied_rule(managed, state)

    def stats(self, radio_limit: int = DEFAULT_LIMIT) -> SwitchStats:
        return self.readback.stats(radio_limit)

    def radio(self, ues: Iterable[int] | None = None, *, limit: int = DEFAULT_LIMIT,
              scan: int = SCAN_LIMIT) -> RadioReport:
        return self.readback.radio(ues, limit=limit, scan=scan)

    def idle_radio(self, ues: Iterable[int]) -> list[IdledUe]:
        with self.session.lock:  # a read of the UEs' registers, then writes computed from it
            return self.readback.idle_radio(ues)

    # ---- tables: jitter distributions -------------------------------------------------------------

    def load_distribution(self, table: DistTable | Sequence[int]) -> DistTable:
        with self.session.lock:
            return self.distributions.load(table)

    def distribution(self, which: str | JitterDistribution = JitterDistribution.USER) -> tuple[int, ...]:
        return self.distributions.read(which)

    # ---- tables: traces ---------------------------------------------------------------------------

    def load_trace(self, trace: MahimahiTrace, reserved: Sequence[TracePlacement] = ()) -> TracePlacement:
        """Load a Mahimahi trace into free trace cells (not those of `reserved`, loaded but not yet
        applied); its placement goes into a direction's `trace` to play it exactly."""
        with self.session.lock:  # free cells are found from a snapshot: one loader at a time
            return self.traces.load(trace, reserved)

    def load_traces(self, traces: Mapping[str, MahimahiTrace]) -> dict[str, TracePlacement]:
        """Load several traces (e.g. one per direction) at once, each in cells of its own: the
        placements, by the same keys."""
        placed: dict[str, TracePlacement] = {}
        with self.session.lock:
            for key, trace in traces.items():
                placed[key] = self.load_trace(trace, reserved=list(placed.values()))
        return placed
