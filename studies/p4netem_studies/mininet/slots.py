"""Which impairment profile each access link ("slot") of a lab runs, programmed through the
controller (p4netem.control): the labs write no classifier or profile entry of their own.

A slot is one impaired access link of the topology: one client (`access: own`), or a group of
clients sharing one queue per direction (`access: shared`). On the switch it is two controller
rules, each a pair of classifier entries (uplink, downlink) with its own profile ids:

  access  client side = the client's switch port and address (own), or the group's address
          block (shared); uplink = packets from it, downlink = packets to it; UE = the slot's UE
          id (0 for a shared group), priority 10;
  DNS     the same plus UDP port 53 on the server side, priority 20: the client's name lookups,
          which run the access profile plus half the lab's DNS latency each way (a lookup then
          takes one access RTT plus the DNS latency). Same UE: a lookup wakes the radio too.

In a routed topology (topology.py: the dumbbell) every hop is its own rule, told apart by the
switch port a packet enters on: a shared slot is the hop between the clients' router and the
servers' router (uplink: entering from the clients' router with a source in the clients'
block; downlink: entering from the servers' router toward that block), and every routed host
has a *link* slot of its own (uplink: entering from the host; downlink: entering from its
router toward the host), with no DNS rule. For a server the link's "uplink" is what the server
sends.

`SlotProfiles.apply` puts a profile on slots with one Controller.apply_many, so the access and
DNS rules of every slot switch in one atomic write (p4netem-switch; on bmv2, which has only
CONTINUE_ON_ERROR, in one write without that guarantee), radio included: with the radio asked
for the profile carries its radio model, otherwise the radio is removed from it (model 0), so a
run with the radio off never inherits a wake-up delay. The record says which (`radio.applied`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4netem import pipeline as pl
from p4netem.control import Controller, Rule
from p4netem.profiles import Direction, Profile, RadioNone
from p4netem.profiles.units import Duration
from p4netem.radio import IdledUe
from p4netem.stats import PdCounters, read_pd_counters
from .topology import Topology

ACCESS_PRIORITY = 10
DNS_PRIORITY = 20
DNS_PORT = 53


@dataclass(frozen=True)
class RadioState:
    model: str                 # none | umts | lte | gprs
    requested: bool
    applied: bool
    note: str = ""
    promotion_s: float | None = None   # the model's idle -> connected promotion delay

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class AppliedProfile:
    slot: int
    profile: Profile
    radio: RadioState
    extra_delay_ns: int = 0    # added per direction on the DNS rule (its share of the DNS latency)
    params: dict = field(default_factory=dict)   # direction -> set_impairment params written
    ues: tuple[int, ...] = ()  # the UE ids of the slot's packets
    rules: tuple[str, ...] = ()  # the traffic of its controller rules (access, DNS)

    def to_json(self) -> dict:
        return {"slot": self.slot, "profile": self.profile.name, "title": self.profile.title,
                "definition": self.profile.to_dict(), "radio": self.radio.to_json(),
                "extra_delay_ms": self.extra_delay_ns / 1e6, "table_params": self.params,
                "ues": list(self.ues), "rules": list(self.rules)}


def promotion_seconds(profile: Profile) -> float | None:
    """The idle-to-connected promotion delay of the profile's radio model (None without one)."""
    radio = profile.radio
    if radio.model == "umts":
        return int(radio.promotion_idle_dch) / 1e9
    if radio.model in ("lte", "gprs"):
        return int(radio.promotion) / 1e9
    return None


def with_extra_delay(profile: Profile, extra_ns: int) -> Profile:
    """The same profile with `extra_ns` more one-way delay in each direction."""
    if not extra_ns:
        return profile
    links = {d: getattr(profile, d).model_copy(
        update={"delay": Duration(int(getattr(profile, d).delay) + extra_ns)})
        for d in ("uplink", "downlink")}
    return profile.model_copy(update=links)


def radio_state(profile: Profile, radio: bool) -> RadioState:
    """What happens to the profile's radio model on this run."""
    promo = promotion_seconds(profile)
    if not profile.has_radio:
        return RadioState("none", radio, False, "profile has no radio model")
    if not radio:
        return RadioState(profile.radio.model, False, False, "radio off for this run", promo)
    return RadioState(profile.radio.model, True, True, "", promo)


@dataclass(frozen=True)
class SlotRules:
    access: Rule
    dns: Rule | None            # None: a host's link in a routed topology (no lookups to delay)
    ues: tuple[int, ...]


def slot_rules(topology: Topology) -> dict[int, SlotRules]:
    """The controller rules of every slot of `topology`: a client's own slot matches its switch
    port and address, a shared slot its clients' address block (Topology.address_block)."""
    out = {}
    for slot in topology.slots:
        hosts = [h for h in topology.clients if h.slot == slot]
        ue = hosts[0].ue or 0
        server: dict = {}
        if hosts[0].router is not None:
            # The bottleneck hop: from the clients' router, to the servers' router.
            far = next(h.router for h in topology.servers if h.router is not None)
            client = {"switch_port": topology.host(hosts[0].router).port,
                      "ip": str(topology.address_block(slot))}
            server = {"switch_port": topology.host(far).port}
        elif len(hosts) == 1:
            client = {"switch_port": hosts[0].port, "ip": hosts[0].ip}
        else:
            client = {"ip": str(topology.address_block(slot))}
        access = Rule.parse({"client": client, "server": server, "ue": ue,
                             "priority": ACCESS_PRIORITY})
        dns = Rule.parse({"client": client, "server": {**server, "ports": DNS_PORT},
                          "protocol": "udp", "ue": ue, "priority": DNS_PRIORITY})
        out[slot] = SlotRules(access, dns, (ue,))
    for h in topology.hosts:
        if h.link is not None:
            link = Rule.parse({"client": {"switch_port": h.port, "ip": h.ip},
                               "server": {"switch_port": topology.host(h.router).port},
                               "ue": 0, "priority": ACCESS_PRIORITY})
            out[h.link] = SlotRules(link, None, (0,))
    return out


class SlotProfiles:
    """The profiles of a lab's slots, through a Controller of the lab's switch."""

    def __init__(self, controller: Controller, topology: Topology):
        self.controller = controller
        self.rules = slot_rules(topology)
        self.applied: dict[int, AppliedProfile] = {}
        # slot -> the profile ids of its (access, DNS) rules: a rule keeps its two ids (the one
        # in force and the spare the next switch writes) for its lifetime. A link has no DNS rule.
        self._ids: dict[int, tuple[tuple[int, int], ...]] = {}

    def apply(self, slots: list[int], profile: Profile, *, radio: bool = False,
              dns_extra_ns: int = 0) -> list[AppliedProfile]:
        """Put `profile` on `slots` (both rules of each, all in one atomic switch)."""
        unknown = [s for s in slots if s not in self.rules]
        if unknown:
            raise ValueError(f"no slot {unknown} in this lab; slots: {sorted(self.rules)}")
        state = radio_state(profile, radio)
        effective = profile if state.applied else profile.model_copy(update={"radio": RadioNone()})
        dns_profile = with_extra_delay(effective, dns_extra_ns)
        assignments = []
        for slot in slots:
            assignments.append((self.rules[slot].access, effective))
            if self.rules[slot].dns is not None:
                assignments.append((self.rules[slot].dns, dns_profile))
        result = iter(self.controller.apply_many(assignments).rules)
        params = {d.field: effective.to_table_params(d) for d in Direction}
        records = []
        for slot in slots:
            applied = [next(result)] + ([next(result)] if self.rules[slot].dns is not None else [])
            self._ids[slot] = tuple((r.profile_id, r.spare_id) for r in applied)
            rec = AppliedProfile(slot, profile, state, dns_extra_ns, params, self.rules[slot].ues,
                                 tuple(r.rule.describe() for r in applied))
            self.applied[slot] = rec
            records.append(rec)
        return records

    def pds(self, slots: list[int] | None = None) -> list[int]:
        """The profile-directions the slots' packets are counted in (every id of both rules)."""
        return [pl.pd_index(pid, d) for slot in (self._ids if slots is None else slots)
                for ids in self._ids.get(slot, ()) for pid in ids for d in (pl.UPLINK, pl.DOWNLINK)]

    def counters(self, slot: int) -> dict[int, PdCounters]:
        """Direction -> counters of the slot's access rule, summed over its two profile ids."""
        if slot not in self._ids:
            raise ValueError(f"slot {slot} has no profile yet; applied: {sorted(self._ids)}")
        client = self.controller.client
        first, second = self._ids[slot][0]
        return {d: read_pd_counters(client, pl.pd_index(first, d)) + read_pd_counters(client, pl.pd_index(second, d))
                for d in (pl.UPLINK, pl.DOWNLINK)}

    def idle_radio(self, slot: int) -> list[IdledUe]:
        """Put the radio of the slot's UEs back in IDLE (Controller.idle_radio)."""
        return self.controller.idle_radio(self.rules[slot].ues)
