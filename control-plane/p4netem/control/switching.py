"""Changing profiles on the switch: validate everything first, then the three writes of a profile
switch (A: stage the new parameters under each rule's spare id; B: flip the classifier entries in
one atomic write; C: delete what nothing points to), or one in-place write; removing rules and
resetting the switch to a plain wire. docs/control.md explains the protocol."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc

from .. import pipeline as pl
from ..p4rt import P4RuntimeError, update
from ..p4rt.encoding import decode
from ..p4rt.entries import build_counter_entry, build_register_entry, build_table_entry
from ..profiles import BUILTIN_NAMES, Profile, ProfileError
from ..profiles.errors import Problem
from ..profiles.program import SLOTS, profile_params, slot_entry
from .catalog import ProfileCatalog, profile_differences
from .readback import DIRECTIONS, AppliedRule, Readback
from .rules import BY_ADDRESS, Rule, RuleError
from .session import Session
from .state import ManagedRule, SwitchState, read_state
from .tag import MAX_PROFILE_ID, MAX_RULE, EntryTag, name_crc

log = logging.getLogger(__name__)

__all__ = ["ProfileSwitching", "ProfileSwitch", "ApplyResult", "DEFAULT_RULE", "PD_STATE_REGISTERS"]

DEFAULT_RULE = Rule.between_ports(1, 2)

# Registers that hold a pd's shaping state; reset when a profile id is (re)used so that a new
# profile starts with an empty virtual clock, no release-order constraint, the good GE state,
# netem's correlations unseeded (as `tc qdisc change` re-seeds them), its on/off link on and its AQM's state
# (CoDel's, RED's, PIE's) fresh. The per-pd registers not here are listed, with why, in
# tests/unit/test_pd_state_registers.py.
PD_STATE_REGISTERS = (pl.NEXT_FREE_NS, pl.LAST_RELEASE_NS, pl.GE_STATE, pl.LOSS4_STATE, *pl.CODEL_REGISTERS,
                      *pl.RED_REGISTERS, *pl.SLOT_REGISTERS, *pl.TRACE_REGISTERS, *pl.CORR_REGISTERS,
                      *pl.ONOFF_REGISTERS, *pl.PIE_REGISTERS)
_PD_COUNTERS = (pl.PROFILE_IN, pl.PROFILE_OUT, pl.PROFILE_DUP, pl.PROFILE_CORRUPT, pl.PROFILE_ECN_MARK)

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

    def to_dict(self) -> dict:
        """JSON-ready, as `p4netem apply --json` and `p4netem set --json` print it."""
        return {"added": self.added, "switched": self.switched, "modified_in_place": self.modified,
                "warnings": list(self.warnings), "flip_ms": round((self.flip_done_ns - self.flip_sent_ns) / 1e6, 3),
                "rules": [r.to_dict() for r in self.rules]}

    def __len__(self) -> int:
        return len(self.rules)


class ProfileSwitch:
    """A prepared profile switch: write A is done, `commit()` sends the one atomic write B."""

    def __init__(self, session: Session, flip: list, cleanup: list, undo: list, result: ApplyResult,
                 reserved: tuple[set[int], set[int]] = (set(), set())):
        self._session = session
        self._flip = flip
        self._cleanup = cleanup
        self._undo = undo
        self.result = result
        self.committed = False
        self._reserved = reserved  # (profile ids, rule numbers) held for this switch until commit()

    def commit(self) -> ApplyResult:
        """Write B: flip every rule to its new profile id in one batch."""
        if self.committed:
            raise RuntimeError("this profile switch was already committed")
        self.result.flip_sent_ns = time.monotonic_ns()
        try:
            self._session.write(self._flip, "switch the classifier to the new profile", atomic=True)
        except P4RuntimeError:
            self._rollback()
            raise
        finally:
            self._release()
        self.result.flip_done_ns = time.monotonic_ns()
        self.committed = True
        return self.result

    def abandon(self) -> None:
        """Not to be committed: undo write A (best effort, as after a failed flip) and give its
        new rules' numbers and profile ids back. Nothing on the switch pointed at them."""
        if self.committed:
            raise RuntimeError("this profile switch was already committed")
        self.committed = True  # neither commit() nor abandon() again
        try:
            self._rollback()
        finally:
            self._release()

    def _release(self) -> None:
        """After the flip the new rules' numbers and spare ids are on the switch (or, after a
        rollback, nothing of them is): other switches may read them from there."""
        ids, numbers = self._reserved
        self._session.reserved_ids.difference_update(ids)
        self._session.reserved_numbers.difference_update(numbers)

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
            self._session.write(updates, what, atomic=False)
        except P4RuntimeError as err:
            log.warning("%s: %s", failed, err)



class ProfileSwitching:
    def __init__(self, session: Session, catalog: ProfileCatalog, readback: Readback):
        self.session = session
        self.catalog = catalog
        self.readback = readback

    def apply(self, profile: Profile | str | Path, rules: Sequence[Rule | Mapping | str] | None = None, *,
              in_place: bool = False) -> ApplyResult:
        """Apply one profile to `rules` (default: DEFAULT_RULE, all traffic between ports 1 and 2).
        Rules already on the switch (same traffic) switch atomically to the new profile; others
        are added above every existing entry (later rules win), the first of `rules` highest.

        in_place=True changes the parameters of a rule already on the switch where they are (a
        MODIFY of its current profile entries, still one atomic write): its rate queue, virtual
        clock, release order and Gilbert-Elliott state carry on, as on one link whose parameters
        change (netem's `tc qdisc change`). The default flips to the spare id: a fresh queue."""
        resolved = self.catalog.resolve(profile)
        return self.apply_many([(rule, resolved) for rule in self.parse_rules(rules)], in_place=in_place)

    def apply_many(self, assignments: Sequence[tuple[Rule | Mapping | str, Profile | str | Path]], *,
                   in_place: bool = False) -> ApplyResult:
        """Apply a profile per rule, every rule switching in the same atomic write."""
        with self.session.lock:
            self._adopt_names(assignments)
            switch = self.prepare(assignments, in_place=in_place)
            result = switch.commit()
            switch.cleanup()
            return result

    def _adopt_names(self, assignments) -> None:
        """A Profile object applied is what its name means from now on (for applied()'s name and
        `modified`): a script that applies "sweep" with 5 ms, then another "sweep" with 20 ms,
        reads back "sweep", not "sweep (modified): 5ms -> 20ms" against the first. The first of
        a name in one call wins (two rules may get two profiles of one name: a lab's access
        profile and its DNS variant); built-in names keep their meaning; an invalid profile is
        left to validate() to report. Timelines (prepare) keep the name's profile, against
        which their `set` steps show as modified."""
        seen: set[str] = set()
        for assignment in assignments:
            if not isinstance(assignment, (tuple, list)) or len(assignment) != 2:
                continue
            profile = assignment[1]
            if not isinstance(profile, Profile) or profile.name in seen or profile.name in BUILTIN_NAMES:
                continue
            seen.add(profile.name)
            try:
                self.catalog.add(profile)
            except ProfileError:
                continue

    def set(self, changes: Mapping[str, object], rules: Sequence[Rule | Mapping | str] | None = None, *,
            in_place: bool = True) -> ApplyResult:
        """Change fields of the profile each rule has on the switch, like a timeline's `set` step:
        `ctl.set({"downlink.rate": "1Mbit", "delay": "40ms"})`. In place by default (the same
        queue carries on at the new parameters); every rule must be on the switch."""
        if not changes:
            raise ProfileError([Problem("set", "no field to change (e.g. downlink.rate=1Mbit)")])
        with self.session.lock:
            return self._set(changes, rules, in_place)

    def _set(self, changes: Mapping[str, object], rules, in_place: bool) -> ApplyResult:
        from .timeline import modify_profile

        wanted = self.parse_rules(rules)
        state = self.session.state()
        assignments, problems = [], []
        for i, rule in enumerate(wanted):
            managed = state.find(rule)
            applied = self.readback.applied_rule(managed, state) if managed is not None else None
            if applied is None or applied.profile is None:
                problems.append(Problem(f"rules[{i}]", f"no profile on the switch to change for {rule.describe()}"))
                continue
            assignments.append((rule, modify_profile(applied.profile, changes)))
        if problems:
            raise RuleError(problems)
        # The changed profile keeps the name the rule has on the switch, even when this
        # controller does not know that name (a profile from a file another process applied):
        # its tag keeps the old CRC, so `applied()` still names it, "(modified)".
        pairs, encoded, warnings = self.validate(assignments)
        switch = self.plan(state, pairs, encoded, warnings, in_place=in_place, keep_names=True)
        result = switch.commit()
        switch.cleanup()
        # Say what differs from the named profile, as applied() will ("lte (modified)").
        result.rules[:] = [replace(r, modified=tuple(profile_differences(self.catalog.get(r.profile_name), r.profile)))
                           if self.catalog.get(r.profile_name) is not None and r.profile is not None else r
                           for r in result.rules]
        return result

    def prepare(self, assignments: Sequence[tuple[Rule | Mapping | str, Profile | str | Path]], *,
                in_place: bool = False) -> ProfileSwitch:
        """Validate, then write the new parameters under the spare ids (write A); the returned
        ProfileSwitch's commit() makes them take effect in one write. Used by timelines to keep
        the time-critical part to one RPC. With in_place=True, rules already on the switch get
        their current profile entries modified by that one write instead (nothing is staged)."""
        pairs, encoded, warnings = self.validate(assignments)
        with self.session.lock:
            self.session.ensure_connected()
            state = self.session.read(lambda: read_state(self.session.client))
            return self.plan(state, pairs, encoded, warnings, in_place=in_place)

    def parse_rules(self, rules: Sequence[Rule | Mapping | str] | Rule | Mapping | str | None) -> list[Rule]:
        """Rules as given to apply/set/remove: a list of Rules, mappings or "key=value,..."
        strings, or one of them alone; None or an empty list: [DEFAULT_RULE]."""
        if isinstance(rules, (Rule, Mapping, str)):
            rules = [rules]  # one rule (a string or a Rule is not a list of rules)
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

    def validate(self, assignments):
        """Everything that can be checked before anything is written (the switch is only asked its
        UE ids and, for a profile that plays a trace, what its trace cells hold)."""
        pairs: list[tuple[Rule, Profile]] = []
        problems: list[Problem] = []
        checked: dict[int, Profile] = {}  # id of a Profile given -> it, validated (once per call)
        for i, assignment in enumerate(assignments):
            where = f"rules[{i}]"
            if isinstance(assignment, (str, Mapping, Rule)) or not isinstance(assignment, Sequence) \
                    or len(assignment) != 2:
                problems.append(Problem(where, f"{assignment!r:.100} is not a (rule, profile) pair"))
                continue
            rule, profile = assignment
            try:
                rule = self.parse_rules([rule])[0]
            except RuleError as exc:
                problems += exc.prefixed(where)
                continue
            try:
                if isinstance(profile, Profile):
                    if id(profile) not in checked:
                        checked[id(profile)] = self.catalog.resolve(profile)
                    profile = checked[id(profile)]
                else:
                    profile = self.catalog.resolve(profile)
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
        self._check_traces(pairs)
        # The params of every slot (both directions' set_impairment and set_radio), encoded
        # before anything is read or written; per pair, as two rules may get different
        # profiles of the same name (a lab's DNS rule: its access profile plus the DNS latency).
        encoded = [profile_params(profile) for _, profile in pairs]
        return pairs, encoded, warnings

    def _check_ue_ids(self, pairs: list[tuple[Rule, Profile]]) -> list[str]:
        """Refuse by-address rules whose UE ids reach beyond the switch's (it would refuse them
        with OUT_OF_RANGE); warn about a named UE beyond them (its packets get no radio)."""
        limit = self.session.ue_ids
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

    def _check_traces(self, pairs: list[tuple[Rule, Profile]]) -> None:
        """Refuse a direction whose `trace` names cells that do not hold a trace of its length and
        period. A profile file may carry a placement (`profiles from-mahimahi -o`, a profile read
        back) while the switch holds no such trace there (not loaded yet, or a restart or `reset
        --hard` cleared it): the switch would take the entry and play zeros, a link that ignores its
        trace and, on p4netem-switch, its delay too. A loaded trace ends at its period (the period is
        its last timestamp, control/trace.py), so its last cell is checked: one read per trace."""
        # (where, cells, opportunities, period) per traced direction; `where` names the field, with
        # the rule's index when several rules are applied at once.
        traced = [(f"rules[{i}].{direction}.trace" if len(pairs) > 1 else f"{direction}.trace",
                   int(t.cells), int(t.opportunities), int(t.period))
                  for i, (_, profile) in enumerate(pairs) for direction in ("uplink", "downlink")
                  if (t := getattr(profile, direction).trace) is not None]
        if not traced:
            return  # nothing to ask the switch (nor a target without trace registers)
        info = self.session.info
        size = info.register(pl.TRACE_OPPORTUNITY_MS).size
        problems = [Problem(where, f"cells {cells}..{cells + n - 1} reach beyond the switch's {size} trace "
                                   f"cells ({pl.TRACE_OPPORTUNITY_MS})")
                    for where, cells, n, _ in traced if cells + n > size]
        traced = [t for t in traced if t[1] + t[2] <= size]
        last_cells = sorted({cells + n - 1 for _, cells, n, _ in traced})
        entries = [build_register_entry(info, pl.TRACE_OPPORTUNITY_MS, cell) for cell in last_cells]
        held = dict(zip(last_cells, (decode(e.register_entry.data.bitstring) for e in
                                     self.session.read(lambda: list(self.session.client.read(*entries)))))) \
            if entries else {}
        problems += [Problem(where, f"the switch holds no trace of {n} opportunities over {period} ms at cells "
                                    f"{cells}..{cells + n - 1} (cell {cells + n - 1} holds {held[cells + n - 1]} ms, "
                                    "not the period): a trace plays only once loaded, and `p4netem trace load "
                                    "--uplink FILE --downlink FILE --profile PROFILE` or `p4netem apply --mahimahi "
                                    "'COMMAND'` loads it and sets the cells")
                     for where, cells, n, period in traced if held[cells + n - 1] != period]
        if problems:
            names = {profile.name for _, profile in pairs}
            raise ProfileError(problems, names.pop() if len(names) == 1 else None)

    def plan(self, state: SwitchState, pairs, encoded, warnings, in_place: bool = False,
              keep_names: bool = False) -> ProfileSwitch:
        """Writes A (done here), B and C (in the ProfileSwitch). keep_names: a rule already on the
        switch keeps its tag's profile-name CRC (set(): a changed copy of whatever it had)."""
        info = self.session.info
        max_ids = min(info.table(pl.PROFILE).size // 2, MAX_PROFILE_ID + 1)
        used_ids = state.used_profile_ids() | self.session.reserved_ids
        used_numbers = set(state.managed) | self.session.reserved_numbers | {
            t.rule for t in (EntryTag.decode(e.controller_metadata) for e in state.broken) if t}
        reserved: tuple[set[int], set[int]] = (set(), set())
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
                self.catalog.remember(profile)
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
                                         f"no free profile ids or rule numbers for {rule.describe()}: a rule takes "
                                         f"two of the switch's profile ids 1..{max_ids - 1} (p4netem-switch "
                                         f"--profiles) and one rule number 1..{MAX_RULE}; {len(state.managed)} rules "
                                         f"and {len(used_ids - {0})} profile ids are in use") from None
                old = spare  # after the flip the other id of the pair is the spare
                reserved[0].update((target, spare))
                reserved[1].add(number)
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
            for d in DIRECTIONS:
                for reg in PD_STATE_REGISTERS:
                    stage.append(update("MODIFY", build_register_entry(info, reg, pl.pd_index(target, d), 0)))
            # Write B: both classifier entries point at `target`; the tag remembers `old` as spare.
            tag = EntryTag(rule=number, spare_id=old, profile_crc=crc).encode()
            for d in DIRECTIONS:
                action, params = rule.classifier_action(d, target)
                flip.append(update(kind, build_table_entry(
                    info, pl.CLASSIFIER, rule.direction_matches(d), action, params, priority=priority,
                    controller_metadata=tag)))
            applied.append(AppliedRule(number=number, rule=rule.model_copy(update={"priority": priority}),
                                       profile=profile, profile_name=label, modified=(),
                                       profile_id=target, spare_id=old))
        self.session.write(stage, "write the new profile parameters", atomic=False, rollback=True)
        self.session.reserved_ids |= reserved[0]
        self.session.reserved_numbers |= reserved[1]
        return ProfileSwitch(self.session, flip, cleanup, undo, result, reserved)

    def _in_place_updates(self, state: SwitchState, managed: ManagedRule, rule: Rule, profile: Profile,
                          enc: list[dict[str, int]], crc: int) -> list:
        """Write B of an in-place change: MODIFY the entries of the rule's current profile id
        whose params differ (nothing is staged, so nothing needs undoing), and its classifier
        entries only when the UE id or the profile's name (the cookie) changes. No register is
        reset: the queue, virtual clock, release order and loss state carry on."""
        info = self.session.info
        out = []
        for slot, params in zip(SLOTS, enc):
            before = state.slot_params(slot, managed.profile_id)
            if before != params:
                out.append(update("MODIFY" if before is not None else "INSERT",
                                  slot_entry(info, slot, managed.profile_id, params)))
        tag = EntryTag(rule=managed.number, spare_id=managed.spare_id, profile_crc=crc)
        for d, entry in zip(DIRECTIONS, managed.entries):
            action, params = rule.classifier_action(d, managed.profile_id)
            if (action, params) != (entry.action, entry.params) or managed.profile_crc != tag.profile_crc:
                out.append(update("MODIFY", build_table_entry(
                    info, pl.CLASSIFIER, rule.direction_matches(d), action, params, priority=managed.priority,
                    controller_metadata=tag.encode())))
        return out

    def _counter_resets(self, profile_id: int) -> list:
        info = self.session.info
        out = []
        for d in DIRECTIONS:
            pd = pl.pd_index(profile_id, d)
            out += [update("MODIFY", build_counter_entry(info, c, pd, 0, 0)) for c in _PD_COUNTERS]
            out += [update("MODIFY", build_counter_entry(info, pl.DROPS, pl.drop_index(pd, r), 0, 0))
                    for r in pl.DropReason]
        return out

    # ---- remove and reset -------------------------------------------------------------------------

    def remove(self, rules: Sequence[Rule | Mapping | str]) -> int:
        """Remove managed rules (matched by their traffic) and their profile entries; returns how
        many were removed. A rule that is not on the switch is an error (nothing is removed). An
        empty list removes nothing (it is not "the default rule", as it is for apply and set)."""
        if rules is not None and not isinstance(rules, (Rule, Mapping, str)) and len(rules) == 0:
            return 0
        with self.session.lock:
            return self._remove(rules)

    def _remove(self, rules: Sequence[Rule | Mapping | str]) -> int:
        wanted = self.parse_rules(rules)
        state = self.session.state()
        found = []
        for i, rule in enumerate(wanted):
            managed = state.find(rule)
            if managed is None:
                raise RuleError([Problem(f"rules[{i}]", f"no such rule on the switch: {rule.describe()}")])
            found.append(managed)
        info = self.session.info
        first, second = [], []
        for managed in found:
            for entry in managed.entries:
                first.append(update("DELETE", build_table_entry(info, pl.CLASSIFIER, entry.match,
                                                                priority=entry.priority)))
            for pid in (managed.profile_id, managed.spare_id):
                second += [update("DELETE", slot_entry(info, slot, pid)) for slot in SLOTS
                           if state.slot_params(slot, pid) is not None]
        self.session.write(first, "remove the rules' classifier entries", atomic=True)
        self.session.write(second, "remove the rules' profile entries", atomic=False)
        return len(found)

    def reset(self, port_map: bool = False) -> None:
        """Back to a plain wire: delete every classifier, profile and radio entry (managed or
        not), restore the tables' default actions, zero every counter, the pd state registers and
        every UE's radio (IDLE, never seen). With port_map=True the port map and the L2
        forwarding entries go too (no traffic passes until they are set again)."""
        with self.session.lock:
            self._reset(port_map)

    def _reset(self, port_map: bool) -> None:
        self.session.ensure_connected()
        # Whatever was prepared and not committed is deleted with the rest.
        self.session.reserved_ids.clear()
        self.session.reserved_numbers.clear()
        info = self.session.info
        state = self.session.state()
        deletes = [update("DELETE", build_table_entry(info, pl.CLASSIFIER, e.match, priority=e.priority))
                   for e in state.classifier]
        deletes += [update("DELETE", slot_entry(info, (pl.PROFILE, d), pid)) for pid, d in state.profiles]
        deletes += [update("DELETE", slot_entry(info, (pl.RADIO_PROFILE, None), pid)) for pid in state.radio]
        if port_map:
            deletes += [update("DELETE", build_table_entry(info, pl.PORT_MAP, {"standard_metadata.ingress_port": p}))
                        for p in state.port_map]
            deletes += [update("DELETE", build_table_entry(info, pl.L2_FWD, {"hdr.ethernet.dst_addr": m}))
                        for m in state.l2]
        self.session.write(deletes, "delete the classifier and profile entries", atomic=False, rollback=True)
        others = [update("MODIFY", build_table_entry(info, t, is_default=True))
                  for t in (pl.CLASSIFIER, pl.PROFILE, pl.RADIO_PROFILE)]
        # Wildcard zero writes: p4netem-switch skips cells that are already zero, so this costs
        # no memory for the million UEs never seen (about 0.4 s for the per-UE arrays; the switch
        # runs it on a blocking thread, so its other clients are answered meanwhile).
        others += [update("MODIFY", build_counter_entry(info, c.name, None, 0, 0))
                   for c in info.counters]
        others += [update("MODIFY", build_register_entry(info, r, None, 0))
                   for r in (*PD_STATE_REGISTERS, pl.BACKLOG_BYTES, pl.BACKLOG_PKTS, *pl.RADIO_REGISTERS)]
        self.session.write(others, "reset default actions, counters and registers", atomic=False)

