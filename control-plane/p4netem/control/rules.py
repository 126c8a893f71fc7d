"""Rules: which traffic gets a profile, in which direction, and for which UE.

A rule describes the traffic between a client side (the UE, the user's machine) and a server
side. It becomes two entries of the pipeline's classifier: packets from the client to the server
are the profile's uplink (direction 0), packets from the server to the client its downlink
(direction 1). Each side may be narrowed by the switch port it is on, its IP address or prefix and
its TCP/UDP ports; the rule as a whole by IP protocol, DSCP and IP version.

    client: {switch_port: 1, ip: 10.0.0.0/24, ports: 1024-65535}
    server: {switch_port: 2, ip: 203.0.113.7, ports: 443}
    protocol: tcp
    dscp: af41
    ue: 7            # the UE id the radio stage keys its per-UE state on
    priority: 100    # optional: higher wins; default: above every existing entry

The UE id selects the radio (one RRC state machine per UE, shared by its uplink and downlink).
`ue: N` gives every packet of the rule UE N (classifier action set_profile). `ue: by-address`
gives each client its own UE: `ue_base + (client address & host mask of client.ip)`, from the
IPv4 source address of uplink packets and the destination of downlink ones (action
set_profile_ue_by_addr), so `{client: 10.0.0.0/24, ue: by-address, ue_base: 1000}` is UEs
1000..1255, one per address.

`client: 10.0.0.1` is short for `client: {ip: 10.0.0.1}`. The rule every command uses when none
is given, `Rule.between_ports(1, 2)`, is "everything entering port 1 is uplink, everything
entering port 2 downlink" (port 1 faces the clients: the p4netem convention).

Validation names the field, the value and what is allowed (RuleError, rendered like ProfileError),
and refuses rules the classifier would silently mis-handle: a client and server of different IP
families, ports with a protocol that has none, or a rule whose uplink and downlink entries would be
identical (the pipeline could not tell the directions apart).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from .. import pipeline as pl
from ..p4rt import Range, Ternary
from ..profiles.errors import KNOWN_FIELDS, FieldProblems, Problem, ProfileError, problems_from_validation_error
from ..profiles.fields import MAX_32, annotate, integer
from ..profiles.units import quote

__all__ = ["Endpoint", "Rule", "RuleError", "PortRange", "parse_rule_option", "load_rules",
           "PROTOCOLS", "DSCP_NAMES", "BY_ADDRESS"]

IpNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

# Key names of the classifier (docs/pipeline-contract.md).
K_IN_PORT = "standard_metadata.ingress_port"
K_ETHER_TYPE = "meta.ether_type"
K_IPV4_SRC, K_IPV4_DST = "meta.ipv4_src", "meta.ipv4_dst"
K_IPV6_SRC, K_IPV6_DST = "meta.ipv6_src", "meta.ipv6_dst"
K_PROTO = "meta.ip_proto"
K_L4_SRC, K_L4_DST = "meta.l4_src_port", "meta.l4_dst_port"
K_DSCP = "meta.dscp"

ETHER_TYPES = {4: 0x0800, 6: 0x86DD}
PROTOCOLS = {"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "gre": 47, "esp": 50, "icmpv6": 58,
             "sctp": 132}
# The pipeline fills l4 ports for TCP and UDP only (0 for everything else).
_PORT_PROTOCOLS = {6, 17}
DSCP_NAMES = {"df": 0, "be": 0, "ef": 46, "va": 44,
              **{f"cs{i}": 8 * i for i in range(8)},
              **{f"af{c}{d}": 8 * c + 2 * d for c in range(1, 5) for d in range(1, 4)}}
MAX_PRIORITY = 2**31 - 1  # P4Runtime priority is an int32 > 0
MAX_SWITCH_PORT = 511  # bit<9>


class RuleError(ProfileError):
    """A rule (or a file of rules) that is not valid; `problems` name each field. Rendered like
    ProfileError (and caught with it: both mean "bad input, nothing was written")."""


# ---- field types ----------------------------------------------------------------------------------


def _parse_network(raw: Any) -> IpNetwork | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("any", "*")):
        return None
    if isinstance(raw, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return raw
    if isinstance(raw, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return ipaddress.ip_network(raw)
    if not isinstance(raw, str):
        raise ValueError(f"{quote(raw)} is not an IP address or prefix (e.g. 10.0.0.1, "
                         "10.0.0.0/24, 2001:db8::/32, any)")
    try:
        return ipaddress.ip_network(raw.strip(), strict=True)
    except ValueError as exc:
        if "has host bits set" in str(exc):
            net = ipaddress.ip_network(raw.strip(), strict=False)
            raise ValueError(f"{quote(raw)} has host bits set; the prefix is {net}") from None
        raise ValueError(f"{quote(raw)} is not an IP address or prefix (e.g. 10.0.0.1, "
                         "10.0.0.0/24, 2001:db8::/32, any)") from None


def _net_str(net: IpNetwork | None) -> str | None:
    """10.0.0.1 for a host, 10.0.0.0/24 for a prefix."""
    if net is None:
        return None
    return str(net.network_address) if net.prefixlen == net.max_prefixlen else str(net)


IpPrefix = Annotated[IpNetwork | None, *annotate(
    _parse_network, _net_str,
    {"type": "string", "description": "IPv4/IPv6 address or prefix"})]


class PortRange(tuple):
    """An inclusive range of TCP/UDP ports (low, high); str() is "443" or "8000-8080"."""

    def __new__(cls, low: int, high: int) -> "PortRange":
        return super().__new__(cls, (low, high))

    @property
    def low(self) -> int:
        return self[0]

    @property
    def high(self) -> int:
        return self[1]

    def __str__(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"

    @classmethod
    def parse(cls, raw: Any) -> "PortRange | None":
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("any", "*")):
            return None
        if isinstance(raw, PortRange):
            return raw
        allowed = "a port 0..65535 or one range low-high (e.g. 443, 8000-8080, any)"
        if isinstance(raw, bool):
            raise ValueError(f"{quote(raw)} is not {allowed}")
        if isinstance(raw, int):
            low = high = raw
        elif isinstance(raw, str) and (m := re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", raw)):
            low = int(m.group(1))
            high = int(m.group(2)) if m.group(2) is not None else low
        else:
            raise ValueError(f"{quote(raw)} is not {allowed}")
        if not (0 <= low <= 65535 and 0 <= high <= 65535):
            raise ValueError(f"{quote(raw)} out of range 0..65535")
        if low > high:
            raise ValueError(f"{quote(raw)}: low port {low} is above high port {high}")
        return cls(low, high)


Ports = Annotated[PortRange | None, *annotate(
    PortRange.parse, lambda r: None if r is None else (r.low if r.low == r.high else str(r)),
    {"type": "string", "description": "port or range low-high"})]


def _parse_protocol(raw: Any) -> int | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("any", "*")):
        return None
    if isinstance(raw, str) and raw.strip().lower() in PROTOCOLS:
        return PROTOCOLS[raw.strip().lower()]
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= 255:
        return raw
    raise ValueError(f"{quote(raw)} is not an IP protocol; allowed {', '.join(PROTOCOLS)}, any "
                     "or a number 0..255")


def _protocol_name(value: int | None) -> Any:
    if value is None:
        return None
    return next((name for name, number in PROTOCOLS.items() if number == value), value)


Protocol = Annotated[int | None, *annotate(_parse_protocol, _protocol_name,
                                           {"description": "IP protocol name or number"})]


def _parse_dscp(raw: Any) -> int | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("any", "*")):
        return None
    if isinstance(raw, str) and raw.strip().lower() in DSCP_NAMES:
        return DSCP_NAMES[raw.strip().lower()]
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if isinstance(raw, int) and not isinstance(raw, bool):
        if 0 <= raw <= 63:
            return raw
        raise ValueError(f"{raw} out of range 0..63")
    raise ValueError(f"{quote(raw)} is not a DSCP; allowed 0..63 or a name (ef, af11..af43, "
                     "cs0..cs7, df)")


Dscp = Annotated[int | None, *annotate(_parse_dscp, lambda v: v,
                                       {"description": "DSCP 0..63 or a name"})]


def _parse_ip_version(raw: Any) -> int | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("any", "*")):
        return None
    text = str(raw).strip().lower().removeprefix("ipv") if not isinstance(raw, bool) else ""
    if text in ("4", "6"):
        return int(text)
    raise ValueError(f"{quote(raw)} is not an IP version; allowed 4, 6 or any")


IpVersion = Annotated[int | None, *annotate(_parse_ip_version, lambda v: v,
                                            {"description": "4 or 6"})]

SwitchPort = integer(0, MAX_SWITCH_PORT, "switch port")
UeId = integer(0, MAX_32, "UE id")
BY_ADDRESS = "by-address"


def _parse_ue(raw: Any) -> int | str:
    """A UE id, or BY_ADDRESS (the UE id comes from each packet's client address)."""
    if isinstance(raw, str) and raw.strip().lower().replace("_", "-") == BY_ADDRESS:
        return BY_ADDRESS
    allowed = f"0..{MAX_32} or {BY_ADDRESS} (ue_base + the client's address bits)"
    if isinstance(raw, str) and re.fullmatch(r"\s*-?\d+\s*", raw):
        raw = int(raw)
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise ValueError(f"{quote(raw)} is not a UE id; allowed {allowed}")
    if not 0 <= raw <= MAX_32:
        raise ValueError(f"{raw} out of range {allowed}")
    return raw


Ue = Annotated[int | str, *annotate(_parse_ue, lambda v: v,
                                    {"description": f"UE id 0..{MAX_32} or {BY_ADDRESS}"})]
Priority = integer(1, MAX_PRIORITY, "priority")


# ---- models ---------------------------------------------------------------------------------------


class Endpoint(BaseModel):
    """One side of the traffic; every field optional (absent = any)."""

    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    switch_port: SwitchPort | None = None  # the P4 port this side's packets enter the switch on
    ip: IpPrefix = None
    ports: Ports = None  # TCP/UDP ports of this side

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, (str, ipaddress.IPv4Address, ipaddress.IPv6Address,
                             ipaddress.IPv4Network, ipaddress.IPv6Network)):
            return {"ip": data}
        if data is None:
            return {}
        if isinstance(data, (Mapping, Endpoint)):
            return data
        raise ValueError(f"{quote(data)} is not an endpoint ({{switch_port, ip, ports}}) or an "
                         "IP address")

    @property
    def any(self) -> bool:
        return self.switch_port is None and self.ip is None and self.ports is None

    def describe(self) -> str:
        parts = [_net_str(self.ip) if self.ip is not None else "any"]
        if self.ports is not None:
            parts[0] += f":{self.ports}"
        if self.switch_port is not None:
            parts.append(f"port {self.switch_port}")
        return " ".join(parts)


class Rule(BaseModel):
    """Which traffic (see the module docs); `ue` and `priority` are what the classifier entries
    carry besides the profile."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    client: Endpoint = Endpoint()
    server: Endpoint = Endpoint()
    protocol: Protocol = None
    dscp: Dscp = None
    ip_version: IpVersion = None
    ue: Ue = 0  # a UE id, or BY_ADDRESS: ue_base + the client's IPv4 address bits
    ue_base: UeId | None = None  # by-address only (default 0)
    priority: Priority | None = None  # None: chosen by the controller (above existing entries)

    @model_validator(mode="before")
    @classmethod
    def _default_ue_base(cls, data: Any) -> Any:
        # by-address without ue_base starts at UE 0 (one canonical form, so rules compare equal).
        if isinstance(data, Mapping) and data.get("ue_base") is None and isinstance(data.get("ue"), str) \
                and data["ue"].strip().lower().replace("_", "-") == BY_ADDRESS:
            return {**data, "ue_base": 0}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "Rule":
        problems = self.inconsistencies()
        if problems:
            raise FieldProblems(problems)
        return self

    def inconsistencies(self) -> list[Problem]:
        problems = []
        ips = [(side, getattr(self, side).ip) for side in ("client", "server")]
        versions = {net.version for _, net in ips if net is not None}
        if len(versions) > 1:
            problems.append(Problem("server.ip", f"{_net_str(self.server.ip)} is IPv{self.server.ip.version} "
                                    f"but client.ip {_net_str(self.client.ip)} is "
                                    f"IPv{self.client.ip.version}; no packet has both"))
        if self.ip_version is not None and versions and versions != {self.ip_version}:
            side, net = next((s, n) for s, n in ips if n is not None)
            problems.append(Problem("ip_version", f"{self.ip_version} contradicts {side}.ip {_net_str(net)}"))
        has_ports = self.client.ports is not None or self.server.ports is not None
        if has_ports and self.protocol is not None and self.protocol not in _PORT_PROTOCOLS:
            problems.append(Problem("protocol", f"{_protocol_name(self.protocol)} has no ports; "
                                    "client.ports/server.ports match TCP and UDP only"))
        problems += self._ue_problems()
        if not problems and self.direction_matches(0) == self.direction_matches(1):
            problems.append(Problem("", "uplink and downlink traffic of this rule look the same; "
                                    "give client and server different switch ports, addresses "
                                    "or ports"))
        return problems

    def _ue_problems(self) -> list[Problem]:
        if self.ue != BY_ADDRESS:
            if self.ue_base is not None:
                return [Problem("ue_base", f"only with ue: {BY_ADDRESS}; a rule with one UE gives its id in ue")]
            return []
        net = self.client.ip
        if net is None:
            return [Problem("ue", f"{BY_ADDRESS} takes the UE id from the client's IPv4 address: give client.ip, "
                            "an IPv4 prefix whose host bits select the UE (e.g. client=10.0.0.0/24)")]
        if net.version != 4:
            return [Problem("ue", f"{BY_ADDRESS} needs an IPv4 client.ip (the pipeline derives UE ids from IPv4 "
                            f"addresses only), not {_net_str(net)}")]
        first, last = self.ue_range.start, self.ue_range.stop - 1
        if last > MAX_32:
            return [Problem("ue_base", f"{first} + {net.num_addresses - 1} (client.ip {net}: {net.num_addresses} "
                            f"addresses) exceeds the largest UE id {MAX_32}")]
        return []

    # ---- UE ids ----------------------------------------------------------------------------------

    @property
    def ue_mask(self) -> int | None:
        """By-address: the host bits of client.ip, which select the UE; None otherwise."""
        if self.ue != BY_ADDRESS or self.client.ip is None:
            return None
        return int(self.client.ip.hostmask)

    @property
    def ue_range(self) -> range:
        """Every UE id the rule's packets can carry."""
        if self.ue != BY_ADDRESS:
            return range(self.ue, self.ue + 1)
        first = self.ue_base or 0
        return range(first, first + (self.ue_mask or 0) + 1)

    def ue_label(self) -> str:
        """"7", or "1000..1255 by address"."""
        if self.ue != BY_ADDRESS:
            return str(self.ue)
        r = self.ue_range
        return f"{r.start} by address" if len(r) == 1 else f"{r.start}..{r.stop - 1} by address"

    def classifier_action(self, direction: int, profile_id: int) -> tuple[str, dict[str, int]]:
        """The classifier action and params of one direction's entry: set_profile with the UE id,
        or set_profile_ue_by_addr reading the client's address (source uplink, destination
        downlink)."""
        common = {"profile_id": profile_id, "direction": direction}
        if self.ue != BY_ADDRESS:
            return pl.SET_PROFILE, {**common, "ue_id": self.ue}
        return pl.SET_PROFILE_UE_BY_ADDR, {**common, "ue_base": self.ue_base or 0, "ue_mask": self.ue_mask,
                                           "ue_from_dst": int(direction == pl.DOWNLINK)}

    # ---- construction ----------------------------------------------------------------------------

    @classmethod
    def between_ports(cls, client_port: int = 1, server_port: int = 2, **fields: Any) -> "Rule":
        """All traffic entering `client_port` is uplink, all entering `server_port` downlink."""
        return cls.parse({"client": {"switch_port": client_port},
                          "server": {"switch_port": server_port}, **fields})

    @classmethod
    def parse(cls, data: Any, source: str | None = None) -> "Rule":
        """Validate a rule document; raises RuleError listing every problem with its field."""
        if isinstance(data, Rule):
            return data
        if not isinstance(data, Mapping):
            raise RuleError([Problem("", f"{quote(data)} is not a rule mapping")], source)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RuleError(problems_from_validation_error(exc, data), source) from None

    # ---- classifier entries ----------------------------------------------------------------------

    def direction_matches(self, direction: int) -> dict[str, Any]:
        """Classifier key matches (key name -> p4rt Ternary/Range) of one direction; keys that match
        anything are left out. Uplink: client -> server; downlink: server -> client."""
        src, dst = (self.client, self.server) if direction == pl.UPLINK else (self.server, self.client)
        match: dict[str, Any] = {}
        if src.switch_port is not None:
            match[K_IN_PORT] = Ternary(src.switch_port, 0x1FF)
        if self.ip_version is not None:
            match[K_ETHER_TYPE] = Ternary(ETHER_TYPES[self.ip_version], 0xFFFF)
        for net, v4, v6 in ((src.ip, K_IPV4_SRC, K_IPV6_SRC), (dst.ip, K_IPV4_DST, K_IPV6_DST)):
            if net is not None and net.prefixlen > 0:
                match[v4 if net.version == 4 else v6] = Ternary(int(net.network_address),
                                                                int(net.netmask))
        if self.protocol is not None:
            match[K_PROTO] = Ternary(self.protocol, 0xFF)
        for ports, key in ((src.ports, K_L4_SRC), (dst.ports, K_L4_DST)):
            if ports is not None and (ports.low, ports.high) != (0, 65535):
                match[key] = Range(ports.low, ports.high)
        if self.dscp is not None:
            match[K_DSCP] = Ternary(self.dscp, 0x3F)
        return match

    def traffic_key(self) -> tuple:
        """What identifies the traffic of a rule: two rules with the same key select the same
        packets (the UE id and an automatic priority are not part of it)."""
        def canon(m: dict[str, Any]) -> tuple:
            return tuple(sorted((k, type(v).__name__, tuple(vars(v).values())) for k, v in m.items()))
        return (canon(self.direction_matches(pl.UPLINK)), canon(self.direction_matches(pl.DOWNLINK)))

    @classmethod
    def from_matches(cls, uplink: Mapping[str, Any], downlink: Mapping[str, Any], ue: int | str,
                     priority: int, ue_base: int | None = None) -> "Rule":
        """The rule whose entries have these decoded matches (as read back from the switch).
        Raises RuleError when the two entries are not the two directions of one rule."""
        def side(m: Mapping[str, Any], src: bool) -> dict[str, Any]:
            """The endpoint fields an entry gives for its source (src) or destination side."""
            out: dict[str, Any] = {}
            if src and K_IN_PORT in m:
                out["switch_port"] = m[K_IN_PORT].value
            for key, version in (((K_IPV4_SRC, 4), (K_IPV6_SRC, 6)) if src
                                 else ((K_IPV4_DST, 4), (K_IPV6_DST, 6))):
                if key in m:
                    out["ip"] = _network_of(m[key], version)
            key = K_L4_SRC if src else K_L4_DST
            if key in m:
                out["ports"] = PortRange(m[key].low, m[key].high)
            return out

        # Uplink goes client -> server; the server's switch port is where the downlink enters.
        server = side(uplink, False)
        if K_IN_PORT in downlink:
            server["switch_port"] = downlink[K_IN_PORT].value
        doc: dict[str, Any] = {"client": side(uplink, True), "server": server,
                               "ue": ue, "priority": priority}
        if ue_base is not None:
            doc["ue_base"] = ue_base
        if K_PROTO in uplink:
            doc["protocol"] = uplink[K_PROTO].value
        if K_DSCP in uplink:
            doc["dscp"] = uplink[K_DSCP].value
        if K_ETHER_TYPE in uplink:
            version = {v: k for k, v in ETHER_TYPES.items()}.get(uplink[K_ETHER_TYPE].value)
            doc["ip_version"] = version if version is not None else uplink[K_ETHER_TYPE].value
        rule = cls.parse(doc, "classifier entries")
        if rule.traffic_key() != (_canon_read(uplink), _canon_read(downlink)):
            raise RuleError([Problem("", "the uplink and downlink entries are not mirror images "
                                     "of one rule")], "classifier entries")
        return rule

    # ---- output ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The shortest document that parses back to this rule."""
        doc = self.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
        for side in ("client", "server"):
            if side in doc and set(doc[side]) == {"ip"}:
                doc[side] = doc[side]["ip"]
            elif side in doc and not doc[side]:
                del doc[side]
        return doc

    def describe(self) -> str:
        """One line for tables and logs."""
        parts = [f"client {self.client.describe()} <-> server {self.server.describe()}"]
        if self.protocol is not None:
            parts.append(str(_protocol_name(self.protocol)))
        if self.dscp is not None:
            parts.append(f"dscp {self.dscp}")
        if self.ip_version is not None:
            parts.append(f"ipv{self.ip_version}")
        return ", ".join(parts)


KNOWN_FIELDS.update(Rule.model_fields, Endpoint.model_fields)


def _network_of(match: Ternary, version: int) -> IpNetwork:
    width = 32 if version == 4 else 128
    mask = int(match.mask)
    prefix = bin(mask).count("1")
    if mask != ((1 << width) - 1) ^ ((1 << (width - prefix)) - 1):
        raise RuleError([Problem("", f"address mask {mask:#x} is not a prefix")], "classifier entries")
    return ipaddress.ip_network((int(match.value), prefix))


def _canon_read(m: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, type(v).__name__, tuple(vars(v).values())) for k, v in m.items()))


# ---- input forms ----------------------------------------------------------------------------------

_SHORT_KEYS = {"client": "client.ip", "server": "server.ip", "proto": "protocol",
               "client_ip": "client.ip", "server_ip": "server.ip"}


def parse_rule_option(text: str) -> Rule:
    """A rule from the command line: `key=value` items separated by commas or spaces, keys as in
    YAML with dots for nesting (`client.switch_port=1,server.ports=443,protocol=tcp,ue=7`);
    `client=IP`/`server=IP` are short for `client.ip`/`server.ip`."""
    doc: dict[str, Any] = {}
    problems: list[Problem] = []
    items = [item for item in re.split(r"[,\s]+", text.strip()) if item]
    if not items:
        raise RuleError([Problem("", "empty rule; e.g. client=10.0.0.1,ue=1")], f"--rule {text!r}")
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or not key:
            problems.append(Problem("", f"{quote(item)} is not key=value"))
            continue
        key = _SHORT_KEYS.get(key, key)
        target = doc
        *parents, leaf = key.split(".")
        for parent in parents:
            node = target.setdefault(parent, {})
            if not isinstance(node, dict):
                problems.append(Problem(key, "given twice"))
                break
            target = node
        else:
            if leaf in target:
                problems.append(Problem(key, "given twice"))
            target[leaf] = value
    if problems:
        raise RuleError(problems, f"--rule {text!r}")
    return Rule.parse(doc, f"--rule {text!r}")


def load_rules(source: str | Sequence[Any], origin: str = "<rules>") -> list[Rule]:
    """Rules from a YAML document: a list of rules, or a mapping with a `rules:` list. `source` is
    YAML text or an already parsed list. Every problem of every rule is reported at once."""
    from ..profiles.yaml_files import _parse_yaml

    data: Any = source
    if isinstance(source, str):
        try:
            data = _parse_yaml(source, origin)
        except ProfileError as exc:
            raise RuleError(exc.problems, origin) from None
    if isinstance(data, Mapping) and "rules" in data:
        data = data["rules"]
    if not isinstance(data, list) or not data:
        raise RuleError([Problem("rules", "must be a non-empty list of rules")], origin)
    rules, problems = _parse_list(data, "rules")
    if problems:
        raise RuleError(problems, origin)
    return rules


def _parse_list(items: Iterable[Any], prefix: str) -> tuple[list[Rule], list[Problem]]:
    rules: list[Rule] = []
    problems: list[Problem] = []
    seen: dict[tuple, int] = {}
    for i, item in enumerate(items):
        try:
            rule = Rule.parse(item)
        except RuleError as exc:
            problems += exc.prefixed(f"{prefix}[{i}]")
            continue
        key = rule.traffic_key()
        if key in seen:
            problems.append(Problem(f"{prefix}[{i}]", f"selects the same traffic as "
                                    f"{prefix}[{seen[key]}]"))
        seen.setdefault(key, i)
        rules.append(rule)
    return rules, problems
