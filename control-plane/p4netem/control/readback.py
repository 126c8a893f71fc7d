"""Reading the switch back: the rules and the profiles they have (decoded from the profile and
radio tables, named by the catalog), counters per rule and direction, the radio of the UEs, and
putting a UE's radio back to IDLE."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .. import pipeline as pl
from ..profiles import Profile
from ..profiles.errors import Problem
from ..radio.idle import IdledUe, plan_idle
from ..stats import PdCounters, read_counters, read_parser_errors
from .catalog import ProfileCatalog, profile_differences
from .radio_view import DEFAULT_LIMIT, SCAN_LIMIT, RadioReport, radio_report
from .rules import Rule, RuleError
from .session import Session
from .state import CLASSIFY_ACTIONS, ManagedRule, SwitchState

__all__ = ["Readback", "AppliedRule", "LinkStats", "SwitchStats", "StatsLayout", "StatsRow"]

DIRECTIONS = (pl.UPLINK, pl.DOWNLINK)

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


@dataclass(frozen=True)
class LinkStats:
    """Counters of one direction of one rule (summed over its two profile ids), or of a
    profile-direction that unmanaged entries or the default action use."""

    label: str  # "#3" for rule 3, "default" for unclassified traffic, "pd 14" otherwise
    direction: str  # uplink / downlink
    profile: str  # profile label, as the table shows it: "lte", "lte (modified)", "profile id 0"
    rule: str  # the traffic, one line
    counters: PdCounters
    number: int | None = None  # the rule's number (AppliedRule.number); None for other rows
    profile_name: str | None = None  # AppliedRule.profile_name: None when unknown or not a rule's

    def to_dict(self) -> dict:
        """JSON-ready. "profile" is the profile's name as `show --json` gives it (null when this
        controller does not know it, and on rows that are not a rule's) and "number" the rule's,
        so the two join on number; "profile_label" is what the table shows."""
        c = self.counters
        return {
            "label": self.label, "number": self.number, "direction": self.direction,
            "profile": self.profile_name, "profile_label": self.profile, "rule": self.rule,
            "packets_in": c.profile_in, "packets_out": c.profile_out, "bytes_in": c.bytes_in,
            "bytes_out": c.bytes_out, "duplicated": c.profile_dup, "corrupted": c.profile_corrupt,
            "dropped": c.dropped, "drops": {r.name.lower(): n for r, n in c.drops.items()},
            "ecn_marked": c.ecn_marked,
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

@dataclass(frozen=True)
class StatsRow:
    """One row of stats(): a rule's direction (or an unmanaged profile-direction, or the default)
    and the pds whose counters it sums."""

    label: str
    direction: str
    profile: str
    rule: str
    pds: tuple[int, ...]
    number: int | None = None
    profile_name: str | None = None


@dataclass(frozen=True)
class StatsLayout:
    """What stats() reads, from one snapshot of the rules: rows, their pds, the applied rules
    (for the radio). It changes only when rules or profiles do (control/stats_poller.py keeps
    it between reads)."""

    rows: tuple[StatsRow, ...]
    rules: tuple[AppliedRule, ...]

    @property
    def pds(self) -> list[int]:
        return sorted({pd for row in self.rows for pd in row.pds})

    def row_stats(self, row: StatsRow, counters: Mapping[int, PdCounters]) -> LinkStats:
        total = counters[row.pds[0]]
        for pd in row.pds[1:]:
            total = total + counters[pd]
        return LinkStats(row.label, row.direction, row.profile, row.rule, total, row.number, row.profile_name)

    def assemble(self, counters: Mapping[int, PdCounters], parser: dict[pl.ParserError, int],
                 radio: RadioReport) -> SwitchStats:
        return SwitchStats(time_ns=time.monotonic_ns(), rows=[self.row_stats(r, counters) for r in self.rows],
                           parser_errors=parser, radio=radio)


class Readback:
    def __init__(self, session: Session, catalog: ProfileCatalog):
        self.session = session
        self.catalog = catalog

    def state(self) -> SwitchState:
        """The raw snapshot (classifier, profile and radio tables, port map) sorted into managed rules."""
        return self.session.state()


    def applied(self) -> list[AppliedRule]:
        """Every managed rule with the profile the switch holds for it, by rule number."""
        return [self.applied_rule(m, s) for s in [self.state()] for m in s.managed.values()]

    def applied_rule(self, managed: ManagedRule, state: SwitchState) -> AppliedRule:
        up = state.profiles.get((managed.profile_id, pl.UPLINK))
        down = state.profiles.get((managed.profile_id, pl.DOWNLINK))
        radio: object = state.radio.get(managed.profile_id)  # set_radio params; None: no entry, no radio
        known = self.catalog.by_crc(managed.profile_crc)
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

    def stats(self, radio_limit: int = DEFAULT_LIMIT) -> SwitchStats:
        """Counters per rule and direction (cumulative over the rule's profile switches), per
        profile-direction of unmanaged entries and of the default profile, parser errors, and
        the radio of up to `radio_limit` UEs of the rules with a radio (radio())."""
        if isinstance(radio_limit, bool) or not isinstance(radio_limit, int) or not 0 <= radio_limit < 2**31:
            raise RuleError([Problem("radio_limit", f"{radio_limit!r} out of range 0..{2**31 - 1} (0: no limit)")])
        layout = self.layout()
        counters = self.session.read(lambda: read_counters(self.session.client, layout.pds))
        parser = self.session.read(lambda: read_parser_errors(self.session.client))
        return layout.assemble({pd: counters[pd] for pd in layout.pds}, parser,
                               self.radio_of(layout, radio_limit))

    def layout(self, state: SwitchState | None = None) -> StatsLayout:
        """The rows stats() shows and the counter cells (pds) each sums, from the rules on the switch."""
        state = state or self.state()
        rules = [self.applied_rule(m, state) for m in state.managed.values()]
        rows: list[StatsRow] = []
        covered: set[int] = set()
        for managed, applied in zip(state.managed.values(), rules):
            for d in DIRECTIONS:
                pds = tuple(pl.pd_index(pid, d) for pid in (managed.profile_id, managed.spare_id))
                rows.append(StatsRow(f"#{managed.number}", _dir_name(d), applied.label, managed.rule.describe(), pds,
                                     managed.number, applied.profile_name))
                covered |= set(pds)
        others: dict[int, list[str]] = {}
        for entry in state.unmanaged + state.broken:
            if entry.action in CLASSIFY_ACTIONS:
                pd = pl.pd_index(entry.params["profile_id"], entry.params["direction"])
                if pd not in covered:
                    others.setdefault(pd, []).append(_match_summary(entry.match))
        for pd in sorted(others):
            rows.append(StatsRow(f"pd {pd}", _dir_name(pd % 2), f"profile id {pd // 2}",
                                 "; ".join(sorted(set(others[pd]))), (pd,)))
            covered.add(pd)
        if 0 not in covered:
            rows.append(StatsRow("default", _dir_name(0), "profile id 0", "unclassified traffic", (0,)))
        return StatsLayout(tuple(rows), tuple(rules))

    def radio_of(self, layout: StatsLayout, radio_limit: int = DEFAULT_LIMIT) -> RadioReport:
        return self.session.read(lambda: radio_report(self.session.client, layout.rules, limit=radio_limit))

    def radio(self, ues: Iterable[int] | None = None, *, limit: int = DEFAULT_LIMIT,
              scan: int = SCAN_LIMIT) -> RadioReport:
        """The radio of `ues` (read whether a rule covers them or not), or by default of the UEs
        the rules with a radio cover: named UEs, and the active ones of by-address rules (at
        most `scan` ids checked per rule); at most `limit` UEs read in full (0: no limit). Each
        with its state, times, promotions, the covering rule's radio model and its energy
        estimate. See control/radio_view.py for the cost."""
        problems = [Problem(name, f"{value!r} out of range 0..{2**31 - 1} (0: no limit)" if name == "limit" else
                            f"{value!r} out of range 0..{2**31 - 1}")
                    for name, value in (("limit", limit), ("scan", scan))
                    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31]
        if ues is not None:
            ues = list(ues)
            problems += self._ue_problems(ues)
        if problems:
            raise RuleError(problems)
        rules = self.applied()
        return self.session.read(lambda: radio_report(self.session.client, rules, ues, limit=limit, scan=scan))

    def _ue_problems(self, ues: list) -> list[Problem]:
        limit = self.session.ue_ids
        beyond = [ue for ue in ues if isinstance(ue, bool) or not isinstance(ue, int) or not 0 <= ue < limit]
        return [Problem("ue", f"UE ids {beyond} outside the switch's 0..{limit - 1} (p4netem-switch --ue-ids)")] \
            if beyond else []

    def idle_radio(self, ues: Iterable[int]) -> list[IdledUe]:
        """Put the radio of each UE in `ues` back in IDLE now (register writes equivalent to a
        demotion when the UE went quiet; p4netem/radio/idle.py says what is written and why), so
        its next packet pays the whole promotion. Promotion counts and time per state are kept.
        Idle a UE while it has no traffic."""
        ues = list(ues)
        problems = self._ue_problems(ues)
        if problems:
            raise RuleError(problems)
        self.session.ensure_connected()
        records, updates = self.session.read(lambda: plan_idle(self.session.client, ues))
        self.session.write(updates, "idle the radio", atomic=False, rollback=True)
        return records

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

