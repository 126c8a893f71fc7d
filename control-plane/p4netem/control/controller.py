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

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc

from .. import pipeline as pl
from ..p4rt import GrpcTls, P4Info, P4RuntimeClient, P4RuntimeError, WriteError, update
from ..p4rt.encoding import decode, to_int
from ..p4rt.entries import build_counter_entry, build_register_entry, build_table_entry
from ..paths import p4info_path
from ..profiles import Profile, ProfileError, builtin_profiles, load_profile
from ..profiles.distribution import TABLE_LEN, DistTable, check_table
from ..profiles.errors import Problem
from ..profiles.link import JitterDistribution
from ..profiles.program import SLOTS, profile_params, slot_entry
from ..stats import PdCounters, read_counters, read_parser_errors
from ..radio.idle import IdledUe, plan_idle
from .radio_view import DEFAULT_LIMIT, SCAN_LIMIT, RadioReport, radio_report
from .rules import BY_ADDRESS, Rule, RuleError
from .state import CLASSIFY_ACTIONS, ManagedRule, SwitchState, read_state
from .tag import MAX_PROFILE_ID, MAX_RULE, EntryTag, name_crc

log = logging.getLogger(__name__)

__all__ = ["Controller", "AppliedRule", "ApplyResult", "ProfileSwitch", "LinkStats", "SwitchStats",
           "DEFAULT_RULE", "resolve_profile"]

DEFAULT_RULE = Rule.between_ports(1, 2)

# Registers that hold a pd's shaping state; reset when a profile id is (re)used so that a new
# profile starts with an empty virtual clock, no release-order constraint and the good GE state.
_PD_STATE_REGISTERS = (pl.NEXT_FREE_NS, pl.LAST_RELEASE_NS, pl.GE_STATE)
_PD_COUNTERS = (pl.PROFILE_IN, pl.PROFILE_OUT, pl.PROFILE_DUP, pl.PROFILE_CORRUPT)
_DIRECTIONS = (pl.UPLINK, pl.DOWNLINK)
# Write atomicity modes, strongest first.
_ATOMICITY = ("DATAPLANE_ATOMIC", "ROLLBACK_ON_ERROR", "CONTINUE_ON_ERROR")


@dataclass(frozen=True)
class AppliedRule:
    """A rule on the switch and the profile it has (read back from the profile table)."""

    number: int  # the rule's number on this switch (stable for its lifetime)
    rule: Rule  # with the priority it has on the switch
    profile: Profile | None  # as programmed (link parameters read back); None if entries are missing
    profile_name: str | None  # name of the profile applied, when known to this controller
    modified: tuple[str, ...]  # fields in which the switch differs from that named profile
    profile_id: int
    spare_id: int

    @property
    def label(self) -> str:
        if self.profile_name is None:
            return "unknown profile"
        return self.profile_name + (" (modified)" if self.modified else "")

    def to_dict(self) -> dict:
        """JSON-ready: the rule, the profile name and the parameters in force, in human units."""
        p = self.profile
        return {
            "number": self.number,
            "rule": self.rule.to_dict(),
            "traffic": self.rule.describe(),
            "profile": self.profile_name,
            "modified": list(self.modified),
            "uplink": p.uplink.model_dump(mode="json", exclude_defaults=True) if p else None,
            "downlink": p.downlink.model_dump(mode="json", exclude_defaults=True) if p else None,
            "radio": p.radio.model_dump(mode="json") if p else None,
            "profile_id": self.profile_id,
            "spare_id": self.spare_id,
        }


@dataclass
class ApplyResult:
    rules: list[AppliedRule]
    added: int = 0
    switched: int = 0  # rules flipped to their spare profile id (a new queue, see docs/control.md)
    modified: int = 0  # rules whose profile entries were modified in place (the same queue)
    warnings: list[str] = field(default_factory=list)
    flip_sent_ns: int = 0  # CLOCK_MONOTONIC when write B was sent ...
    flip_done_ns: int = 0  # ... and when the switch acknowledged it (the new profiles are in force)

    def __iter__(self) -> Iterator[AppliedRule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)


@dataclass(frozen=True)
class LinkStats:
    """Counters of one direction of one rule (summed over its two profile ids), or of a
    profile-direction that unmanaged entries or the default action use."""

    label: str  # "#3" for rule 3, "default" for unclassified traffic, "pd 14" otherwise
    direction: str  # uplink / downlink
    profile: str  # profile label
    rule: str  # the traffic, one line
    counters: PdCounters

    def to_dict(self) -> dict:
        c = self.counters
        return {
            "label": self.label, "direction": self.direction, "profile": self.profile, "rule": self.rule,
            "packets_in": c.profile_in, "packets_out": c.profile_out, "bytes_in": c.bytes_in,
            "bytes_out": c.bytes_out, "duplicated": c.profile_dup, "corrupted": c.profile_corrupt,
            "dropped": c.dropped, "drops": {r.name.lower(): n for r, n in c.drops.items()},
            "held": c.conservation_gap(),
        }


@dataclass(frozen=True)
class SwitchStats:
    time_ns: int  # CLOCK_MONOTONIC when read
    rows: list[LinkStats]
    parser_errors: dict[pl.ParserError, int]
    radio: RadioReport  # the UEs the rules with a radio cover (bounded: see radio_view.py)

    def to_dict(self) -> dict:
        return {"rows": [r.to_dict() for r in self.rows],
                "parser_errors": {e.name.lower(): n for e, n in self.parser_errors.items()},
                "radio": self.radio.to_dict()}


class ProfileSwitch:
    """A prepared profile switch: write A is done, `commit()` sends the one atomic write B."""

    def __init__(self, ctl: Controller, flip: list, cleanup: list, undo: list, result: ApplyResult):
        self._ctl = ctl
        self._flip = flip
        self._cleanup = cleanup
        self._undo = undo
        self.result = result
        self.committed = False

    def commit(self) -> ApplyResult:
        """Write B: flip every rule to its new profile id in one batch."""
        if self.committed:
            raise RuntimeError("this profile switch was already committed")
        self.result.flip_sent_ns = time.monotonic_ns()
        try:
            self._ctl._write(self._flip, "switch the classifier to the new profile", atomic=True)
        except P4RuntimeError:
            self._rollback()
            raise
        self.result.flip_done_ns = time.monotonic_ns()
        self.committed = True
        return self.result

    def cleanup(self) -> None:
        """Write C: delete the profile entries nothing points to any more (never raises: the
        switch already runs the new profile; a leftover entry is harmless and reused later)."""
        self._write_or_warn(self._cleanup, "delete the old profile entries", "leftover profile entries")

    def _rollback(self) -> None:
        self._write_or_warn(self._undo, "undo the staged profile entries",
                            "could not undo the staged profile entries")

    def _write_or_warn(self, updates: list, what: str, failed: str) -> None:
        """A best-effort write (cleanup, undo): a failure is logged, not raised, so it never
        hides the outcome (or the error) of the flip it follows."""
        if not updates:
            return
        try:
            self._ctl._write(updates, what, atomic=False)
        except P4RuntimeError as err:
            log.warning("%s: %s", failed, err)


class Controller:
    """A controller of one p4netem switch (see the module docstring)."""

    def __init__(self, client: P4RuntimeClient, *, profiles: Iterable[Profile] = (), owns_client: bool = False,
                 max_atomicity: str = "DATAPLANE_ATOMIC"):
        if max_atomicity not in _ATOMICITY:
            raise ValueError(f"max_atomicity must be one of {', '.join(_ATOMICITY)}, not {max_atomicity!r}")
        self.client = client
        self._owns_client = owns_client
        # The strongest Write atomicity the target offers. p4netem-switch has all three; a target
        # that has only CONTINUE_ON_ERROR (bmv2's P4Runtime server) is told so up front instead
        # of being asked for more on every write (_write still falls back on UNIMPLEMENTED).
        self.max_atomicity = max_atomicity
        self._known: dict[str, Profile] = dict(builtin_profiles())
        for profile in profiles:
            self.add_profile(profile)
        self._local_p4info: P4Info | None = None

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
    ) -> Controller:
        """Connect to a switch. With primary=True (the default) run arbitration with `election_id`;
        the controller can write only if it became primary (`is_primary`). With primary=False
        open a read-only connection (no stream, no election: never disturbs other controllers).

        The switch's pipeline is checked against `p4info` (default: p4src/p4netem.p4info.txtpb);
        a switch without a pipeline gets it pushed (primary only). `tls`: see P4RuntimeClient (None:
        from the environment, plaintext if it names nothing)."""
        client = P4RuntimeClient(address, device_id=device_id, election_id=election_id, role=role, timeout=timeout,
                                 tls=tls)
        client.connect(arbitrate=primary)
        ctl = cls(client, profiles=profiles, owns_client=True, max_atomicity=max_atomicity)
        try:
            if isinstance(p4info, P4Info):
                ctl._local_p4info = p4info
            else:
                path = Path(p4info) if p4info else p4info_path()
                ctl._local_p4info = P4Info.load(path) if path.exists() else None
            ctl._adopt_pipeline()
        except BaseException:
            client.close()
            raise
        return ctl

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_primary(self) -> bool:
        return self.client.is_primary

    @property
    def address(self) -> str:
        return self.client.address

    def reconnect(self, election_id: int | None = None) -> None:
        """Reconnect and re-run arbitration (with a new election id if given)."""
        self.client.reconnect(election_id=election_id)
        self._adopt_pipeline()

    def _ensure_connected(self) -> None:
        if not self.client.connected:
            log.info("connection to %s lost; reconnecting", self.address)
            self.reconnect()

    def _adopt_pipeline(self) -> None:
        """Use the switch's P4Info; push ours if it has none; verify ours matches if we can."""
        info, _, _ = self.client.get_pipeline("P4INFO_AND_COOKIE")
        if info is None:
            if self._local_p4info is None:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"the switch at {self.address} has no pipeline and no local P4Info was found")
            if not self.is_primary:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"the switch at {self.address} has no pipeline; a primary controller must push it")
            self.client.set_pipeline(self._local_p4info, action="VERIFY_AND_COMMIT")
        else:
            self.client.p4info = info
            if self.is_primary and self._local_p4info is not None:
                self.verify_pipeline()
        self.client.p4info = info or self._local_p4info

    def verify_pipeline(self, p4info: P4Info | None = None) -> None:
        """Ask the switch whether it runs the pipeline of `p4info` (default: the local contract):
        SetForwardingPipelineConfig VERIFY. Raises INVALID_ARGUMENT naming the first difference."""
        p4info = p4info or self._local_p4info
        if p4info is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "no local P4Info to verify against")
        running = self.client.p4info
        if running is not None:
            p4info = _sized_like(p4info, running)
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
        p4info = p4info or self._local_p4info
        if p4info is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "no local P4Info to push")
        self._ensure_connected()
        action = "RECONCILE_AND_COMMIT" if keep_state else "VERIFY_AND_COMMIT"
        try:
            self.client.set_pipeline(p4info, action=action)
        except P4RuntimeError as err:
            raise self._explain(err, "push the pipeline") from None

    # ---- profiles ---------------------------------------------------------------------------------

    def add_profile(self, profile: Profile) -> None:
        """Make a profile known by name (to apply it by name and to show it by name)."""
        self._known[profile.name] = profile

    @property
    def known_profiles(self) -> dict[str, Profile]:
        return dict(self._known)

    def resolve_profile(self, profile: Profile | str | Path) -> Profile:
        """A Profile, a known name (built-in or added) or a YAML file holding one profile."""
        resolved = resolve_profile(profile, self._known)
        self._known.setdefault(resolved.name, resolved)
        return resolved

    # ---- ports ------------------------------------------------------------------------------------

    def set_port_map(self, mapping: Mapping[int, int]) -> None:
        """Forward packets entering port k out of port mapping[k] (other ports are left as they are)."""
        for src, dst in mapping.items():
            for port in (src, dst):
                if not 0 <= int(port) <= 511:
                    raise RuleError([Problem("port_map", f"port {port} out of range 0..511")])
        self._ensure_connected()
        self._set_forwarding(pl.PORT_MAP, "standard_metadata.ingress_port", read_state(self.client).port_map,
                             mapping, "set the port map")

    def set_l2_forwarding(self, mapping: Mapping[str | int, int]) -> None:
        """Forward packets to destination MAC m out of port mapping[m] (l2_fwd, which takes
        precedence over the port map; other MACs are left as they are). How a lab with more than
        two hosts forwards: one entry per host."""
        problems = []
        macs: dict[int, int] = {}
        for mac, port in mapping.items():
            try:
                value = to_int(mac, 48, f"MAC {mac}")
            except P4RuntimeError as err:
                problems.append(Problem("l2", err.message))
                continue
            if not 0 <= int(port) <= 511:
                problems.append(Problem("l2", f"port {port} for {mac} out of range 0..511"))
            macs[value] = int(port)
        if problems:
            raise RuleError(problems)
        self._ensure_connected()
        self._set_forwarding(pl.L2_FWD, "hdr.ethernet.dst_addr", read_state(self.client).l2, macs,
                             "set the L2 forwarding entries")

    def _set_forwarding(self, table: str, key: str, current: Mapping[int, int | str],
                        mapping: Mapping[int, int], what: str) -> None:
        """INSERT or MODIFY the entries of a forwarding table whose out port changes, in one write."""
        updates = []
        for src, dst in sorted(mapping.items()):
            if current.get(src) == dst:
                continue
            entry = build_table_entry(self.client.info, table, {key: src}, pl.SET_EGRESS_PORT, {"port": dst})
            updates.append(update("MODIFY" if src in current else "INSERT", entry))
        self._write(updates, what, atomic=True)

    def bump_in_the_wire(self, port_a: int = 1, port_b: int = 2) -> None:
        """Forward port_a <-> port_b (the inline-shaper setup)."""
        self.set_port_map({port_a: port_b, port_b: port_a})

    def port_map(self) -> dict[int, int | str]:
        self._ensure_connected()
        return self._read(lambda: read_state(self.client).port_map)

    # ---- apply ------------------------------------------------------------------------------------

    def apply(self, profile: Profile | str | Path, rules: Sequence[Rule | Mapping | str] | None = None, *,
              in_place: bool = False) -> ApplyResult:
        """Apply one profile to `rules` (default: DEFAULT_RULE, all traffic between ports 1 and 2).
        Rules already on the switch (same traffic) switch atomically to the new profile; others
        are added above every existing entry (later rules win), the first of `rules` highest.

        in_place=True changes the parameters of a rule already on the switch where they are (a
        MODIFY of its current profile entries, still one atomic write): its rate queue, virtual
        clock, release order and Gilbert-Elliott state carry on, as on one link whose parameters
        change (netem's `tc qdisc change`). The default flips to the spare id: a fresh queue."""
        resolved = self.resolve_profile(profile)
        return self.apply_many([(rule, resolved) for rule in self._rules(rules)], in_place=in_place)

    def apply_many(self, assignments: Sequence[tuple[Rule | Mapping | str, Profile | str | Path]], *,
                   in_place: bool = False) -> ApplyResult:
        """Apply a profile per rule, every rule switching in the same atomic write."""
        switch = self.prepare(assignments, in_place=in_place)
        result = switch.commit()
        switch.cleanup()
        return result

    def set(self, changes: Mapping[str, object], rules: Sequence[Rule | Mapping | str] | None = None, *,
            in_place: bool = True) -> ApplyResult:
        """Change fields of the profile each rule has on the switch, like a timeline's `set` step:
        `ctl.set({"downlink.rate": "1Mbit", "delay": "40ms"})`. In place by default (the same
        queue carries on at the new parameters); every rule must be on the switch."""
        from .timeline import modify_profile

        if not changes:
            raise ProfileError([Problem("set", "no field to change (e.g. downlink.rate=1Mbit)")])
        wanted = self._rules(rules)
        state = self.state()
        assignments, problems = [], []
        for i, rule in enumerate(wanted):
            managed = state.find(rule)
            applied = self._applied_rule(managed, state) if managed is not None else None
            if applied is None or applied.profile is None:
                problems.append(Problem(f"rules[{i}]", f"no profile on the switch to change for {rule.describe()}"))
                continue
            assignments.append((rule, modify_profile(applied.profile, changes)))
        if problems:
            raise RuleError(problems)
        # The changed profile keeps the name the rule has on the switch, even when this
        # controller does not know that name (a profile from a file another process applied):
        # its tag keeps the old CRC, so `applied()` still names it, "(modified)".
        pairs, encoded, warnings = self._validate(assignments)
        switch = self._plan(state, pairs, encoded, warnings, in_place=in_place, keep_names=True)
        result = switch.commit()
        switch.cleanup()
        # Say what differs from the named profile, as applied() will ("lte (modified)").
        result.rules[:] = [replace(r, modified=tuple(profile_differences(self._known[r.profile_name], r.profile)))
                           if r.profile_name in self._known and r.profile is not None else r
                           for r in result.rules]
        return result

    def prepare(self, assignments: Sequence[tuple[Rule | Mapping | str, Profile | str | Path]], *,
                in_place: bool = False) -> ProfileSwitch:
        """Validate, then write the new parameters under the spare ids (write A); the returned
        ProfileSwitch's commit() makes them take effect in one write. Used by timelines to keep
        the time-critical part to one RPC. With in_place=True, rules already on the switch get
        their current profile entries modified by that one write instead (nothing is staged)."""
        pairs, encoded, warnings = self._validate(assignments)
        self._ensure_connected()
        state = self._read(lambda: read_state(self.client))
        return self._plan(state, pairs, encoded, warnings, in_place=in_place)

    def _rules(self, rules: Sequence[Rule | Mapping | str] | None) -> list[Rule]:
        if rules is None or len(rules) == 0:
            return [DEFAULT_RULE]
        from .rules import parse_rule_option

        out, problems = [], []
        for i, rule in enumerate(rules):
            try:
                out.append(parse_rule_option(rule) if isinstance(rule, str) else Rule.parse(rule))
            except RuleError as exc:
                problems += exc.prefixed(f"rules[{i}]") if len(rules) > 1 else exc.problems
        if problems:
            raise RuleError(problems)
        return out

    def _validate(self, assignments):
        """Everything that can be checked without the switch, before anything is written."""
        pairs: list[tuple[Rule, Profile]] = []
        problems: list[Problem] = []
        for i, (rule, profile) in enumerate(assignments):
            where = f"rules[{i}]"
            try:
                rule = self._rules([rule])[0]
            except RuleError as exc:
                problems += exc.prefixed(where)
                continue
            try:
                profile = self.resolve_profile(profile)
            except ProfileError as exc:
                raise exc.with_source(exc.source or str(profile)) from None
            pairs.append((rule, profile))
        seen: dict[tuple, int] = {}
        for i, (rule, _) in enumerate(pairs):
            key = rule.traffic_key()
            if key in seen:
                problems.append(Problem(f"rules[{i}]", f"selects the same traffic as rules[{seen[key]}]"))
            seen.setdefault(key, i)
        if problems:
            raise RuleError(problems)
        if not pairs:
            raise RuleError([Problem("rules", "no rule to apply")])
        warnings = self._check_ue_ids(pairs)
        # The params of every slot (both directions' set_impairment and set_radio), encoded
        # before anything is read or written; per pair, as two rules may get different
        # profiles of the same name (a lab's DNS rule: its access profile plus the DNS latency).
        encoded = [profile_params(profile) for _, profile in pairs]
        return pairs, encoded, warnings

    @property
    def ue_ids(self) -> int:
        """How many UEs the switch holds radio state for (p4netem-switch --ue-ids): the size of
        its per-UE registers in the P4Info it reports."""
        return self.client.info.register(pl.RADIO_STATE).size

    def _check_ue_ids(self, pairs: list[tuple[Rule, Profile]]) -> list[str]:
        """Refuse by-address rules whose UE ids reach beyond the switch's (it would refuse them
        with OUT_OF_RANGE); warn about a named UE beyond them (its packets get no radio)."""
        limit = self.ue_ids
        problems, warnings = [], []
        for i, (rule, profile) in enumerate(pairs):
            ues = rule.ue_range
            if ues.stop <= limit:
                continue
            if rule.ue == BY_ADDRESS:
                problems.append(Problem(
                    f"rules[{i}].ue_base", f"UE ids {ues.start}..{ues.stop - 1} ({len(ues)} addresses of client.ip "
                    f"{rule.client.ip}) reach beyond the switch's {limit} UE ids (0..{limit - 1}, "
                    f"p4netem-switch --ue-ids); use a ue_base of at most {limit - len(ues)} or a longer prefix"
                    if len(ues) <= limit else
                    f"client.ip {rule.client.ip} has {len(ues)} addresses, more than the switch's {limit} UE ids "
                    f"(p4netem-switch --ue-ids); use a longer prefix"))
            elif profile.has_radio:
                warnings.append(f"{rule.describe()}: ue {rule.ue} is beyond the switch's {limit} UE ids "
                                f"(p4netem-switch --ue-ids): its packets get no radio")
        if problems:
            raise RuleError(problems)
        return warnings

    def _plan(self, state: SwitchState, pairs, encoded, warnings, in_place: bool = False,
              keep_names: bool = False) -> ProfileSwitch:
        """Writes A (done here), B and C (in the ProfileSwitch). keep_names: a rule already on the
        switch keeps its tag's profile-name CRC (set(): a changed copy of whatever it had)."""
        info = self.client.info
        max_ids = min(info.table(pl.PROFILE).size // 2, MAX_PROFILE_ID + 1)
        used_ids = state.used_profile_ids()
        used_numbers = set(state.managed) | {
            t.rule for t in (EntryTag.decode(e.controller_metadata) for e in state.broken) if t}
        free_ids = (i for i in range(1, max_ids) if i not in used_ids)
        free_numbers = (n for n in range(1, MAX_RULE + 1) if n not in used_numbers)
        new_rules = [rule for rule, _ in pairs if state.find(rule) is None and rule.priority is None]
        next_priority = state.max_priority() + len(new_rules)

        stage, flip, cleanup, undo = [], [], [], []
        applied: list[AppliedRule] = []
        result = ApplyResult(rules=applied, warnings=list(warnings))
        for (rule, profile), enc in zip(pairs, encoded):
            managed = state.find(rule)
            crc = managed.profile_crc if keep_names and managed is not None else name_crc(profile.name)
            known = crc == name_crc(profile.name)
            if known:
                # Remember new names for read-back; a changed copy of a known profile (a
                # timeline's `set`) must not replace the original, which is what `modified` is
                # measured against.
                self._known.setdefault(profile.name, profile)
            label = profile.name if known else None
            if managed is not None and in_place:
                flip += self._in_place_updates(state, managed, rule, profile, enc, crc)
                result.modified += 1
                applied.append(AppliedRule(number=managed.number, rule=managed.rule.model_copy(
                    update={"ue": rule.ue, "ue_base": rule.ue_base}), profile=profile, profile_name=label,
                    modified=(), profile_id=managed.profile_id, spare_id=managed.spare_id))
                continue
            if managed is not None:
                target, old, number, priority = managed.spare_id, managed.profile_id, managed.number, managed.priority
                kind = "MODIFY"
                result.switched += 1
            else:
                try:
                    target, spare = next(free_ids), next(free_ids)
                    number = next(free_numbers)
                except StopIteration:
                    raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                         f"no free profile ids or rule numbers for {rule.describe()}") from None
                old = spare  # after the flip the other id of the pair is the spare
                if rule.priority is not None:
                    priority = rule.priority
                else:
                    priority, next_priority = next_priority, next_priority - 1
                kind = "INSERT"
                result.added += 1
                # A new rule starts with zeroed counters on both of its ids (a removed rule may
                # have used them before).
                for pid in (target, spare):
                    stage += self._counter_resets(pid)
            # Write A: the new parameters (both directions and the radio) under `target`, its pd
            # state reset; undo puts back what `target` held, cleanup deletes `old`'s entries.
            for slot, params in zip(SLOTS, enc):
                before = state.slot_params(slot, target)
                stage.append(update("MODIFY" if before is not None else "INSERT",
                                    slot_entry(info, slot, target, params)))
                undo.append(update("DELETE", slot_entry(info, slot, target)) if before is None
                            else update("MODIFY", slot_entry(info, slot, target, before)))
                if kind == "MODIFY" and state.slot_params(slot, old) is not None:
                    cleanup.append(update("DELETE", slot_entry(info, slot, old)))
            for d in _DIRECTIONS:
                for reg in _PD_STATE_REGISTERS:
                    stage.append(update("MODIFY", build_register_entry(info, reg, pl.pd_index(target, d), 0)))
            # Write B: both classifier entries point at `target`; the tag remembers `old` as spare.
            tag = EntryTag(rule=number, spare_id=old, profile_crc=crc).encode()
            for d in _DIRECTIONS:
                action, params = rule.classifier_action(d, target)
                flip.append(update(kind, build_table_entry(
                    info, pl.CLASSIFIER, rule.direction_matches(d), action, params, priority=priority,
                    controller_metadata=tag)))
            applied.append(AppliedRule(number=number, rule=rule.model_copy(update={"priority": priority}),
                                       profile=profile, profile_name=label, modified=(),
                                       profile_id=target, spare_id=old))
        self._write(stage, "write the new profile parameters", atomic=False, rollback=True)
        return ProfileSwitch(self, flip, cleanup, undo, result)

    def _in_place_updates(self, state: SwitchState, managed: ManagedRule, rule: Rule, profile: Profile,
                          enc: list[dict[str, int]], crc: int) -> list:
        """Write B of an in-place change: MODIFY the entries of the rule's current profile id
        whose params differ (nothing is staged, so nothing needs undoing), and its classifier
        entries only when the UE id or the profile's name (the cookie) changes. No register is
        reset: the queue, virtual clock, release order and loss state carry on."""
        info = self.client.info
        out = []
        for slot, params in zip(SLOTS, enc):
            before = state.slot_params(slot, managed.profile_id)
            if before != params:
                out.append(update("MODIFY" if before is not None else "INSERT",
                                  slot_entry(info, slot, managed.profile_id, params)))
        tag = EntryTag(rule=managed.number, spare_id=managed.spare_id, profile_crc=crc)
        for d, entry in zip(_DIRECTIONS, managed.entries):
            action, params = rule.classifier_action(d, managed.profile_id)
            if (action, params) != (entry.action, entry.params) or managed.profile_crc != tag.profile_crc:
                out.append(update("MODIFY", build_table_entry(
                    info, pl.CLASSIFIER, rule.direction_matches(d), action, params, priority=managed.priority,
                    controller_metadata=tag.encode())))
        return out

    def _counter_resets(self, profile_id: int) -> list:
        info = self.client.info
        out = []
        for d in _DIRECTIONS:
            pd = pl.pd_index(profile_id, d)
            out += [update("MODIFY", build_counter_entry(info, c, pd, 0, 0)) for c in _PD_COUNTERS]
            out += [update("MODIFY", build_counter_entry(info, pl.DROPS, pl.drop_index(pd, r), 0, 0))
                    for r in pl.DropReason]
        return out

    # ---- read back --------------------------------------------------------------------------------

    def state(self) -> SwitchState:
        """The raw snapshot (classifier, profile and radio tables, port map) sorted into managed rules."""
        self._ensure_connected()
        return self._read(lambda: read_state(self.client))

    def applied(self) -> list[AppliedRule]:
        """Every managed rule with the profile the switch holds for it, by rule number."""
        return [self._applied_rule(m, s) for s in [self.state()] for m in s.managed.values()]

    def _applied_rule(self, managed: ManagedRule, state: SwitchState) -> AppliedRule:
        up = state.profiles.get((managed.profile_id, pl.UPLINK))
        down = state.profiles.get((managed.profile_id, pl.DOWNLINK))
        radio: object = state.radio.get(managed.profile_id)  # set_radio params; None: no entry, no radio
        known = next((p for p in self._known.values() if name_crc(p.name) == managed.profile_crc), None)
        profile = None
        modified: tuple[str, ...] = ()
        if up is not None and down is not None:
            name = known.name if known else "unknown"
            meta = {"title": known.title, "description": known.description, "source": known.source} if known else {}
            if known is not None and radio == known.radio_table_params():
                radio = known.radio  # the same radio; keeps the power figures the table does not hold
            profile = Profile.from_table_params(name, up, down, radio, **meta)
            if known is not None:
                modified = tuple(profile_differences(known, profile))
        return AppliedRule(number=managed.number, rule=managed.rule, profile=profile,
                           profile_name=known.name if known else None, modified=modified,
                           profile_id=managed.profile_id, spare_id=managed.spare_id)

    # ---- remove and reset -------------------------------------------------------------------------

    def remove(self, rules: Sequence[Rule | Mapping | str]) -> int:
        """Remove managed rules (matched by their traffic) and their profile entries; returns how
        many were removed. A rule that is not on the switch is an error (nothing is removed)."""
        wanted = self._rules(rules)
        state = self.state()
        found = []
        for i, rule in enumerate(wanted):
            managed = state.find(rule)
            if managed is None:
                raise RuleError([Problem(f"rules[{i}]", f"no such rule on the switch: {rule.describe()}")])
            found.append(managed)
        info = self.client.info
        first, second = [], []
        for managed in found:
            for entry in managed.entries:
                first.append(update("DELETE", build_table_entry(info, pl.CLASSIFIER, entry.match,
                                                                priority=entry.priority)))
            for pid in (managed.profile_id, managed.spare_id):
                second += [update("DELETE", slot_entry(info, slot, pid)) for slot in SLOTS
                           if state.slot_params(slot, pid) is not None]
        self._write(first, "remove the rules' classifier entries", atomic=True)
        self._write(second, "remove the rules' profile entries", atomic=False)
        return len(found)

    def reset(self, port_map: bool = False) -> None:
        """Back to a plain wire: delete every classifier, profile and radio entry (managed or
        not), restore the tables' default actions, zero every counter, the pd state registers and
        every UE's radio (IDLE, never seen). With port_map=True the port map and the L2
        forwarding entries go too (no traffic passes until they are set again)."""
        self._ensure_connected()
        info = self.client.info
        state = self.state()
        deletes = [update("DELETE", build_table_entry(info, pl.CLASSIFIER, e.match, priority=e.priority))
                   for e in state.classifier]
        deletes += [update("DELETE", slot_entry(info, (pl.PROFILE, d), pid)) for pid, d in state.profiles]
        deletes += [update("DELETE", slot_entry(info, (pl.RADIO_PROFILE, None), pid)) for pid in state.radio]
        if port_map:
            deletes += [update("DELETE", build_table_entry(info, pl.PORT_MAP, {"standard_metadata.ingress_port": p}))
                        for p in state.port_map]
            deletes += [update("DELETE", build_table_entry(info, pl.L2_FWD, {"hdr.ethernet.dst_addr": m}))
                        for m in state.l2]
        self._write(deletes, "delete the classifier and profile entries", atomic=False, rollback=True)
        others = [update("MODIFY", build_table_entry(info, t, is_default=True))
                  for t in (pl.CLASSIFIER, pl.PROFILE, pl.RADIO_PROFILE)]
        # Wildcard zero writes: p4netem-switch skips cells that are already zero, so this costs
        # no memory for the million UEs never seen (about 0.2 s for the per-UE arrays).
        others += [update("MODIFY", build_counter_entry(info, c.name, None, 0, 0))
                   for c in info.counters]
        others += [update("MODIFY", build_register_entry(info, r, None, 0))
                   for r in (*_PD_STATE_REGISTERS, pl.BACKLOG_BYTES, pl.BACKLOG_PKTS, *pl.RADIO_REGISTERS)]
        self._write(others, "reset default actions, counters and registers", atomic=False)

    # ---- timelines --------------------------------------------------------------------------------

    def run_timeline(self, timeline, rules: Sequence[Rule | Mapping | str] | None = None, *,
                     lead_s: float = 0.2, on_event=None, rt_priority: int = 4, stop=None):
        """Run a Timeline (or a path to its YAML) on `rules` (default: the timeline's own rules,
        else DEFAULT_RULE). Everything is validated before the first write; returns a
        TimelineResult with the time error of every change. Ctrl-C stops it (result.interrupted)
        and leaves the switch on the last profile applied; so does setting `stop` (a
        threading.Event) from another thread."""
        from .timeline import Timeline, TimelinePlayer

        if not isinstance(timeline, Timeline):
            timeline = Timeline.load(timeline)
        parsed = self._rules(rules) if rules else None
        return TimelinePlayer(self, timeline, parsed, lead_s=lead_s, on_event=on_event,
                              rt_priority=rt_priority, stop=stop).run()

    # ---- counters ---------------------------------------------------------------------------------

    def stats(self, radio_limit: int = DEFAULT_LIMIT) -> SwitchStats:
        """Counters per rule and direction (cumulative over the rule's profile switches), per
        profile-direction of unmanaged entries and of the default profile, parser errors, and
        the radio of up to `radio_limit` UEs of the rules with a radio (radio())."""
        state = self.state()
        rules = [self._applied_rule(m, state) for m in state.managed.values()]
        rows: list[tuple[str, str, str, str, tuple[int, ...]]] = []
        covered: set[int] = set()
        for managed, applied in zip(state.managed.values(), rules):
            for d in _DIRECTIONS:
                pds = tuple(pl.pd_index(pid, d) for pid in (managed.profile_id, managed.spare_id))
                rows.append((f"#{managed.number}", _dir_name(d), applied.label, managed.rule.describe(), pds))
                covered |= set(pds)
        others: dict[int, list[str]] = {}
        for entry in state.unmanaged + state.broken:
            if entry.action in CLASSIFY_ACTIONS:
                pd = pl.pd_index(entry.params["profile_id"], entry.params["direction"])
                if pd not in covered:
                    others.setdefault(pd, []).append(_match_summary(entry.match))
        for pd in sorted(others):
            rows.append((f"pd {pd}", _dir_name(pd % 2), f"profile id {pd // 2}", "; ".join(sorted(set(others[pd]))),
                         (pd,)))
            covered.add(pd)
        if 0 not in covered:
            rows.append(("default", _dir_name(0), "profile id 0", "unclassified traffic", (0,)))
        counters = self._read(lambda: read_counters(self.client, [pd for row in rows for pd in row[4]]))
        out = []
        for label, direction, profile, rule, pds in rows:
            total = counters[pds[0]]
            for pd in pds[1:]:
                total = total + counters[pd]
            out.append(LinkStats(label, direction, profile, rule, total))
        parser = self._read(lambda: read_parser_errors(self.client))
        radio = self._read(lambda: radio_report(self.client, rules, limit=radio_limit))
        return SwitchStats(time_ns=time.monotonic_ns(), rows=out, parser_errors=parser, radio=radio)

    def radio(self, ues: Iterable[int] | None = None, *, limit: int = DEFAULT_LIMIT,
              scan: int = SCAN_LIMIT) -> RadioReport:
        """The radio of `ues` (read whether a rule covers them or not), or by default of the UEs
        the rules with a radio cover: named UEs, and the active ones of by-address rules (at
        most `scan` ids checked per rule); at most `limit` UEs read in full (0: no limit). Each
        with its state, times, promotions, the covering rule's radio model and its energy
        estimate. See control/radio_view.py for the cost."""
        rules = self.applied()
        return self._read(lambda: radio_report(self.client, rules, ues, limit=limit, scan=scan))

    def idle_radio(self, ues: Iterable[int]) -> list[IdledUe]:
        """Put the radio of each UE in `ues` back in IDLE now (register writes equivalent to a
        demotion when the UE went quiet; p4netem/radio/idle.py says what is written and why), so
        its next packet pays the whole promotion. Promotion counts and time per state are kept.
        Idle a UE while it has no traffic."""
        ues = list(ues)
        limit = self.ue_ids
        beyond = [ue for ue in ues if not 0 <= ue < limit]
        if beyond:
            raise RuleError([Problem("ue", f"UE ids {beyond} outside the switch's 0..{limit - 1} "
                                     "(p4netem-switch --ue-ids)")])
        self._ensure_connected()
        records, updates = self._read(lambda: plan_idle(self.client, ues))
        self._write(updates, "idle the radio", atomic=False, rollback=True)
        return records

    # ---- jitter distribution tables --------------------------------------------------------------

    def load_distribution(self, table: DistTable | Sequence[int]) -> DistTable:
        """Write the user table of dist_table: what `jitter_distribution: user` draws from (a
        DistTable from load_dist/load_samples, or TABLE_LEN int16 cells in sigma/8192 units).
        Checked first (ProfileError, nothing written); then one Write of every cell with
        ROLLBACK_ON_ERROR, so a refused load leaves the old table whole. Primary only. A profile
        already using the user table draws from the new cells from then on (a packet in the
        middle of the write may get an old or a new cell). `reset --hard` (push_pipeline with
        keep_state=False) or a switch restart puts the zeros back."""
        if not isinstance(table, DistTable):
            values = check_table(table)
            table = DistTable(values=values, source="distribution table", entries=TABLE_LEN)
        else:
            check_table(table.values, table.source)
        self._ensure_connected()
        info = self.client.info
        base = self._dist_base(JitterDistribution.USER)
        # Two's complement in the bit<16> cells (docs/pipeline-contract.md).
        updates = [update("MODIFY", build_register_entry(info, pl.DIST_TABLE, base + i, v & 0xFFFF))
                   for i, v in enumerate(table.values)]
        self._write(updates, "load the user distribution table", atomic=False, rollback=True)
        return table

    def distribution(self, which: str | JitterDistribution = JitterDistribution.USER) -> tuple[int, ...]:
        """The TABLE_LEN signed cells of one table of dist_table as the switch holds them: `user`
        (default; all zero until loaded), or the built-in `normal`, `pareto`, `paretonormal`."""
        try:
            dist = JitterDistribution.parse(which)
        except ValueError as exc:
            raise ProfileError([Problem("distribution", str(exc))]) from None
        self._ensure_connected()
        base = self._dist_base(dist)
        info = self.client.info

        def read() -> tuple[int, ...]:
            cells = dict.fromkeys(range(base, base + TABLE_LEN), None)
            entries = [build_register_entry(info, pl.DIST_TABLE, i) for i in cells]
            for e in self.client.read(*entries):
                r = e.register_entry
                cells[r.index.index] = decode(r.data.bitstring)
            missing = [i for i, v in cells.items() if v is None]
            if missing:
                raise P4RuntimeError(grpc.StatusCode.INTERNAL, f"the switch returned no value for "
                                     f"{len(missing)} cells of {pl.DIST_TABLE} (first: index {missing[0]})")
            return tuple(v - 0x10000 if v >= 0x8000 else v for v in cells.values())

        return self._read(read)

    def _dist_base(self, dist: JitterDistribution) -> int:
        """First dist_table index of a table distribution's slot ((dist - 2) * TABLE_LEN)."""
        if dist.code < pl.JitterDist.NORMAL:
            raise ProfileError([Problem("distribution", f"{dist.value} has no table; allowed normal, pareto, "
                                        "paretonormal, user")])
        base = (dist.code - pl.JitterDist.NORMAL) * TABLE_LEN
        size = self.client.info.register(pl.DIST_TABLE).size
        if base + TABLE_LEN > size:
            raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"the switch's {pl.DIST_TABLE} has {size} cells, "
                                 f"too few for the {dist.value} table at {base}..{base + TABLE_LEN - 1}")
        return base

    # ---- plumbing ---------------------------------------------------------------------------------

    def _read(self, fn):
        """Run a read; on UNAVAILABLE reconnect once and retry (reads are idempotent)."""
        try:
            return fn()
        except P4RuntimeError as err:
            if err.code != grpc.StatusCode.UNAVAILABLE:
                raise self._explain(err, "read") from None
            self.reconnect()
            return fn()

    def _write(self, updates: list, what: str, atomic: bool, rollback: bool = False) -> None:
        """One Write. atomic: DATAPLANE_ATOMIC (table entries only; seen whole by the data plane);
        rollback: ROLLBACK_ON_ERROR (all or nothing). Falls back to weaker atomicity only when the
        target says UNIMPLEMENTED."""
        if not updates:
            return
        modes = ["DATAPLANE_ATOMIC", "ROLLBACK_ON_ERROR"] if atomic else (["ROLLBACK_ON_ERROR"] if rollback else [])
        modes.append("CONTINUE_ON_ERROR")
        modes = [m for m in modes if _ATOMICITY.index(m) >= _ATOMICITY.index(self.max_atomicity)]
        for mode in modes:
            try:
                self.client.write(updates, atomicity=mode)
                return
            except WriteError as err:
                if err.code == grpc.StatusCode.UNIMPLEMENTED and mode != "CONTINUE_ON_ERROR":
                    log.warning("%s: the switch does not support %s; trying a weaker atomicity", what, mode)
                    continue
                raise self._explain(err, what) from None

    def _explain(self, err: P4RuntimeError, what: str) -> P4RuntimeError:
        """The same error with a plain sentence for the cases users hit."""
        c = self.client
        if err.code == grpc.StatusCode.PERMISSION_DENIED:
            highest = c.primary_election_id
            seen = f"; the switch's highest election id is {highest}" if highest is not None else ""
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


def _sized_like(contract: P4Info, running: P4Info) -> P4Info:
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


def resolve_profile(profile: Profile | str | Path, known: Mapping[str, Profile] | None = None) -> Profile:
    """A Profile as is, a name from `known` (default: the built-ins), or a YAML file with one
    profile. Raises ProfileError naming what was not found."""
    known = builtin_profiles() if known is None else known
    if isinstance(profile, Profile):
        return profile
    name = str(profile)
    if name in known:
        return known[name]
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_profile(path)
    raise ProfileError([Problem("", f"no built-in or known profile {name!r} and no such file; "
                                f"built-ins: {', '.join(builtin_profiles())}")])


def _dir_name(direction: int) -> str:
    return "uplink" if direction == pl.UPLINK else "downlink"


def _match_summary(match: Mapping) -> str:
    if not match:
        return "all traffic"
    parts = []
    for key, m in sorted(match.items()):
        short = key.rsplit(".", 1)[-1]
        vals = tuple(vars(m).values())
        parts.append(f"{short}={vals[0]}" if len(vals) == 1 or (len(vals) == 2 and short in ("ingress_port",)) else
                     f"{short}={'/'.join(str(v) for v in vals)}")
    return " ".join(parts)


def profile_differences(expected: Profile, actual: Profile) -> list[str]:
    """Field paths where `actual` differs from `expected` as the switch would see them, with both
    values: ["downlink.delay: 50ms -> 80ms", ...]."""
    out = []
    for direction in ("uplink", "downlink"):
        if expected.link(direction).to_table_params() == actual.link(direction).to_table_params():
            continue
        a = getattr(expected, direction).model_dump(mode="json")
        b = getattr(actual, direction).model_dump(mode="json")
        out += [f"{direction}.{key}: {_fmt(a[key])} -> {_fmt(b[key])}" for key in a if a[key] != b[key]]
    if expected.radio_table_params() != actual.radio_table_params():
        a = expected.radio.model_dump(mode="json")
        b = actual.radio.model_dump(mode="json")
        # Power figures never reach the switch: only the fields it holds can differ.
        out += [f"radio.{key}: {_fmt(a.get(key, '-'))} -> {_fmt(b.get(key, '-'))}"
                for key in dict.fromkeys([*a, *b]) if not key.startswith("power_") and a.get(key) != b.get(key)]
    return out


def _fmt(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)
