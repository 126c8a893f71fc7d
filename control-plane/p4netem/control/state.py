"""What a switch holds, read back in one P4Runtime Read and sorted into the controller's terms.

The controller keeps no state of its own between calls: every operation starts from this snapshot
(classifier, profile and radio tables, port map), so any number of CLI invocations, scripts and
other P4Runtime clients can take turns on one switch. Entries written by this package carry an
EntryTag cookie (tag.py) and are grouped into ManagedRules; every other classifier entry is
"unmanaged" (shown, counted, never modified except by reset).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .. import pipeline as pl
from ..p4rt import P4RuntimeClient, TableEntryView, decode_table_entry
from ..p4rt.proto import p4runtime_pb2
from ..profiles.errors import ProfileError
from .rules import BY_ADDRESS, Rule, RuleError
from .tag import EntryTag

__all__ = ["ManagedRule", "SwitchState", "read_state", "CLASSIFY_ACTIONS"]

# The classifier actions that give a profile (and a UE id: named, or derived from the address).
CLASSIFY_ACTIONS = (pl.SET_PROFILE, pl.SET_PROFILE_UE_BY_ADDR)


@dataclass(frozen=True)
class ManagedRule:
    """A rule this package wrote: its uplink and downlink classifier entries, read back."""

    number: int
    rule: Rule
    profile_id: int  # the id its entries point to now
    spare_id: int  # the id the next profile switch will write to
    profile_crc: int  # crc32 of the name of the profile last applied
    priority: int
    entries: tuple[TableEntryView, TableEntryView]  # (uplink, downlink)


@dataclass
class SwitchState:
    classifier: list[TableEntryView]
    profiles: dict[tuple[int, int], dict[str, int]]  # (profile id, direction) -> set_impairment params
    port_map: dict[int, int | str]  # in port -> out port (or the action name when not a port)
    l2: dict[int, int | str] = field(default_factory=dict)  # destination MAC -> out port (l2_fwd)
    managed: dict[int, ManagedRule] = field(default_factory=dict)
    broken: list[TableEntryView] = field(default_factory=list)  # tagged entries that form no rule
    unmanaged: list[TableEntryView] = field(default_factory=list)
    radio: dict[int, dict[str, int]] = field(default_factory=dict)  # profile id -> set_radio params

    def slot_params(self, slot: tuple[str, int | None], profile_id: int) -> dict[str, int] | None:
        """The action params of one of a profile id's entries (p4netem.profiles.program.SLOTS),
        None when the switch has no such entry."""
        table, direction = slot
        if table == pl.RADIO_PROFILE:
            return self.radio.get(profile_id)
        return self.profiles.get((profile_id, direction))

    def used_profile_ids(self) -> set[int]:
        """Ids that something refers to: classifier entries, profile entries, spare ids, and 0
        (the classifier's default action sends unclassified traffic to profile 0)."""
        used = {0}
        used |= {pid for pid, _ in self.profiles}
        used |= set(self.radio)
        for entry in self.classifier:
            if entry.action in CLASSIFY_ACTIONS:
                used.add(entry.params.get("profile_id", 0))
        for rule in self.managed.values():
            used |= {rule.profile_id, rule.spare_id}
        for entry in self.broken:
            tag = EntryTag.decode(entry.controller_metadata)
            if tag:
                used.add(tag.spare_id)
        return used

    def max_priority(self) -> int:
        return max((e.priority for e in self.classifier), default=0)

    def find(self, rule: Rule) -> ManagedRule | None:
        """The managed rule selecting the same traffic (and with the same priority when `rule`
        asks for one)."""
        key = rule.traffic_key()
        for managed in self.managed.values():
            if managed.rule.traffic_key() == key and rule.priority in (None, managed.priority):
                return managed
        return None


STATE_TABLES = (pl.CLASSIFIER, pl.PROFILE, pl.RADIO_PROFILE, pl.PORT_MAP, pl.L2_FWD)


def state_wildcards(info) -> list:
    """The Read filters of every table a SwitchState is made of."""
    return [p4runtime_pb2.TableEntry(table_id=info.table(t).id) for t in STATE_TABLES]


def read_state(client: P4RuntimeClient) -> SwitchState:
    """One Read of the classifier, profile, radio-profile, port-map and l2_fwd tables."""
    return state_of(client.info, [e.table_entry for e in client.read(*state_wildcards(client.info))])


def state_of(info, table_entries: Iterable) -> SwitchState:
    """The SwitchState of the table entries a Read of state_wildcards() returned."""
    by_table: dict[str, list[TableEntryView]] = {t: [] for t in STATE_TABLES}
    for entry in table_entries:
        view = decode_table_entry(info, entry)
        by_table.setdefault(view.table, []).append(view)

    profiles = {}
    for e in by_table[pl.PROFILE]:
        if e.action == pl.SET_IMPAIRMENT:
            profiles[(e.match["meta.profile_id"].value, e.match["meta.direction"].value)] = e.params
    port_map = {e.match["standard_metadata.ingress_port"].value: _forward_to(e) for e in by_table[pl.PORT_MAP]}
    l2 = {e.match["hdr.ethernet.dst_addr"].value: _forward_to(e) for e in by_table[pl.L2_FWD]}
    radio = {e.match["meta.profile_id"].value: e.params for e in by_table[pl.RADIO_PROFILE]
             if e.action == pl.SET_RADIO}

    state = SwitchState(classifier=by_table[pl.CLASSIFIER], profiles=profiles, port_map=port_map, l2=l2,
                        radio=radio)
    _group_rules(state)
    return state


def _forward_to(entry: TableEntryView) -> int | str:
    """The out port of a forwarding entry, or its action's name when it does not name a port."""
    return entry.params["port"] if entry.action == pl.SET_EGRESS_PORT else (entry.action or "?").rsplit(".", 1)[-1]


def _group_rules(state: SwitchState) -> None:
    groups: dict[int, list[TableEntryView]] = {}
    for entry in state.classifier:
        tag = EntryTag.decode(entry.controller_metadata)
        if tag is None or entry.action not in CLASSIFY_ACTIONS:
            state.unmanaged.append(entry)
        else:
            groups.setdefault(tag.rule, []).append(entry)
    for number, entries in sorted(groups.items()):
        by_dir = {e.params["direction"]: e for e in entries}
        up, down = by_dir.get(pl.UPLINK), by_dir.get(pl.DOWNLINK)
        tags = {e.controller_metadata for e in entries}
        same = (
            len(entries) == 2 and up is not None and down is not None and len(tags) == 1
            and up.params["profile_id"] == down.params["profile_id"] and up.priority == down.priority
        )
        rule = _rule_of(up, down) if same else None
        if rule is None:
            state.broken += entries
            continue
        tag = EntryTag.decode(up.controller_metadata)
        assert tag is not None
        state.managed[number] = ManagedRule(
            number=number, rule=rule, profile_id=up.params["profile_id"], spare_id=tag.spare_id,
            profile_crc=tag.profile_crc, priority=up.priority, entries=(up, down),
        )


def _rule_of(up: TableEntryView, down: TableEntryView) -> Rule | None:
    """The rule whose two classifier entries these are, or None when they are not the entries
    this package writes for one rule (Rule.classifier_action, both directions)."""
    try:
        if up.action == pl.SET_PROFILE:
            rule = Rule.from_matches(up.match, down.match, ue=up.params["ue_id"], priority=up.priority)
        else:
            rule = Rule.from_matches(up.match, down.match, ue=BY_ADDRESS, ue_base=up.params["ue_base"],
                                     priority=up.priority)
    except (RuleError, ProfileError):
        return None
    pid = up.params["profile_id"]
    for view, d in ((up, pl.UPLINK), (down, pl.DOWNLINK)):
        if (view.action, view.params) != rule.classifier_action(d, pid):
            return None  # e.g. a mask that is not the client prefix's, or different UE ids
    return rule
