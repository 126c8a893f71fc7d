"""Lab topologies as data: a YAML file in `topologies/` names host groups, their roles and
addresses; `TopologySpec.expand()` turns it into the concrete hosts of one lab.

A lab has one p4netem switch. Each host hangs off its own switch port (in file order, from port
1). The impaired link is the clients' access link: a client's *slot* is the impaired link its
packets take, uplink (from it) and downlink (to it), one controller rule (mininet/slots.py), and
its UE id selects its radio state. `access: own` gives every client of a group its own slot and
UE id (cellular UEs, the single client of inline/multi-origin); `access: shared` puts the whole
group in one slot (the dumbbell's bottleneck: one queue per direction for everyone).

Routed groups (`router: NAME`, the dumbbell) reach the other side through a router host (role
`router`, one IP-forwarding namespace on its own switch port), so each packet crosses the switch
once per hop and each hop is its own rule with its own profile: every host of a routed group has
its own access *link* (host <-> its router, slot `link`), and a routed client group's shared slot
is the hop between its router and the servers' router (the bottleneck). `routes()` says which
prefix each host and router sends via which router.

Mininet is not imported here, so topologies can be loaded and checked anywhere.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from p4netem import safe_yaml
from p4netem.paths import topologies_dir
from p4netem.safe_yaml import YamlInputError

__all__ = ["HostGroup", "TopologySpec", "LabHostSpec", "Topology", "TopologyError",
           "load_topology", "topology_names", "MAX_SLOT", "MAX_HOSTS", "RESERVED_NAMES"]

# A slot is two controller rules (access and DNS) of two profile ids each (the one in force and
# the spare of the atomic switch); the pipeline has profile ids 1..4095 for them.
MAX_SLOT = 1023
# Every host takes a switch port (1, 2, ... in file order). Ports are 9 bits and the lab's switch
# (p4netem-switch, bmv2) keeps 510 for its CPU port and refuses 511: 509 hosts at most. Checked
# when the topology expands, so a huge count is refused at once, not after the many minutes of
# building namespaces that the switch then refused.
MAX_HOSTS = 509
# Names a host cannot take: the lab's switch node (Mininet names every node, hosts and the switch,
# in one namespace) and the commands of the lab's CLI (Mininet's and LabCLI's `do_*`), which the
# CLI runs instead of a host command, so `py ping ...` would never reach a host named `py`.
# tests/labs/test_lab_bugbash.py checks this list against the CLI classes.
SWITCH_NAME = "s1"
CLI_COMMANDS = frozenset({
    "dpctl", "dump", "exit", "gterm", "help", "intfs", "iperf", "iperfudp", "link", "links", "net",
    "nodes", "noecho", "pingall", "pingallfull", "pingpair", "pingpairfull", "ports", "px", "py",
    "quit", "sh", "source", "switch", "time", "wait", "x", "xterm",      # Mininet 2.3's CLI
    "hosts", "iw", "load", "profile"})                                  # the lab's (mininet/cli.py)
RESERVED_NAMES = CLI_COMMANDS | {SWITCH_NAME}
_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
# A topology's name is shown in tables and logs: no markup, spaces or path separators.
_TOPO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Addresses no host can take: "this network", loopback, multicast, limited broadcast (an
# interface takes them, but nothing reaches its peer: ping fails with EINVAL or ENETUNREACH).
_NOT_HOST = [ipaddress.IPv4Network(n) for n in ("0.0.0.0/8", "127.0.0.0/8", "224.0.0.0/4",
                                                 "255.255.255.255/32")]
_PARAM = re.compile(r"^\{([a-z_][a-z0-9_]*)\}$")


class TopologyError(ValueError):
    """A topology file or parameter is wrong; the message names the field and the allowed values."""


class HostGroup(BaseModel):
    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str                                    # with count > 1 hosts are name1..nameN
    role: Literal["client", "server", "router"]
    count: int | str = 1                         # a number or "{param}"
    ip: ipaddress.IPv4Address                    # first address; the group counts up from it
    access: Literal["own", "shared"] = "own"     # clients: a slot (and UE id) each, or one shared
    router: str | None = None                    # routed: the router host it reaches others via

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r} is not a host name: lowercase letter first, then letters or "
                             "digits, at most 12 characters")
        if v in RESERVED_NAMES:
            raise ValueError(f"{v!r} is {_reserved_why(v)}: name the group otherwise")
        return v

    @field_validator("ip")
    @classmethod
    def _ip(cls, v: ipaddress.IPv4Address) -> ipaddress.IPv4Address:
        for net in _NOT_HOST:
            if v in net:
                raise ValueError(f"{v} is in {net}, which holds no host addresses (this network, "
                                 "loopback, multicast, broadcast): use a unicast address such as "
                                 "10.0.0.1")
        return v

    @field_validator("count", mode="before")
    @classmethod
    def _count_not_bool(cls, v):
        if isinstance(v, bool):     # YAML `true` would otherwise count as 1
            raise ValueError(f"{v!r} is neither a number nor a parameter reference like '{{n}}'")
        return v

    @field_validator("count")
    @classmethod
    def _count(cls, v: int | str) -> int | str:
        if isinstance(v, int):
            if not 1 <= v <= MAX_SLOT:
                raise ValueError(f"{v} out of range 1..{MAX_SLOT}")
        elif not _PARAM.match(v):
            raise ValueError(f"{v!r} is neither a number nor a parameter reference like '{{n}}'")
        return v


class TopologySpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    description: str = ""
    prefix_len: int = Field(16, ge=8, le=30)     # every host in one subnet (the switch is L2)
    params: dict[str, int] = {}
    hosts: list[HostGroup]
    # The file the user named (a path, not a name in topologies/): errors found when the topology
    # expands say which file they are about.
    _source: Path | None = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _topology_name(cls, v: str) -> str:
        if not _TOPO_NAME.match(v):
            raise ValueError(f"{v!r} is not a topology name: a letter or digit first, then letters, "
                             "digits, '.', '_' or '-', at most 64 characters")
        return v

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, v):
        # A default is a host count as much as `-p NAME=N` is: the same range, so that a file
        # cannot expand to a lab without clients or servers (0 or a negative default).
        if isinstance(v, dict):
            for key, value in v.items():
                if isinstance(value, bool):
                    raise ValueError(f"{key}: {value!r} is not a number")
                if isinstance(value, int) and not 1 <= value <= MAX_SLOT:
                    raise ValueError(f"{key}: default {value} out of range 1..{MAX_SLOT}")
        return v

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[HostGroup]) -> list[HostGroup]:
        roles = {g.role for g in v}
        if not {"client", "server"} <= roles:
            raise ValueError("a topology needs at least one client group and one server group")
        names = [g.name for g in v]
        if len(set(names)) != len(names):
            raise ValueError(f"host group names repeat: {names}")
        routers = {g.name: g for g in v if g.role == "router"}
        for g in v:
            if g.role == "router":
                if g.count != 1 or g.router is not None or g.access != "own":
                    raise ValueError(f"router {g.name!r}: one host (count 1), no router or "
                                     "access of its own")
            elif g.router is not None:
                if g.router not in routers:
                    raise ValueError(f"group {g.name!r}: router {g.router!r} is not a router "
                                     f"group; routers: {', '.join(routers) or 'none'}")
                if g.role == "client" and g.access != "shared":
                    raise ValueError(f"group {g.name!r}: a routed client group shares one "
                                     "bottleneck (access: shared)")
        routed = [g for g in v if g.router is not None]
        if routed:
            if any(g.router is None for g in v if g.role != "router"):
                raise ValueError("either every client and server group has a router or none")
            server_routers = {g.router for g in routed if g.role == "server"}
            client_routers = {g.router for g in routed if g.role == "client"}
            if len(server_routers) != 1 or server_routers & client_routers:
                raise ValueError("routed servers sit behind one router, not the clients' "
                                 f"(servers: {sorted(server_routers)}, clients: "
                                 f"{sorted(client_routers)})")
        return v

    def expand(self, overrides: dict[str, int] | None = None) -> "Topology":
        """The concrete hosts for these parameter values (defaults from `params`)."""
        try:
            return self._expand(overrides)
        except TopologyError as exc:
            if self._source is None:
                raise
            raise TopologyError(f"{self._source}: {exc}") from None

    def _expand(self, overrides: dict[str, int] | None) -> "Topology":
        params = dict(self.params)
        for key, value in (overrides or {}).items():
            if key not in params:
                raise TopologyError(f"topology {self.name!r} has no parameter {key!r}; "
                                    f"parameters: {', '.join(params) or 'none'}")
            if not isinstance(value, int) or not 1 <= value <= MAX_SLOT:
                raise TopologyError(f"parameter {key}={value!r} out of range 1..{MAX_SLOT}")
            params[key] = value
        counts = []
        for index, group in enumerate(self.hosts):
            count = group.count
            if isinstance(count, str):
                ref = _PARAM.match(count).group(1)
                if ref not in params:
                    raise TopologyError(f"topology {self.name!r}: hosts.{index}.count {count!r} "
                                        "names no parameter in `params`; parameters: "
                                        f"{', '.join(params) or 'none'}")
                count = params[ref]
            if int(group.ip) + count - 1 > int(ipaddress.IPv4Address("255.255.255.255")):
                raise TopologyError(f"topology {self.name!r}: hosts.{index} ({group.name!r}): "
                                    f"{count} addresses from {group.ip} run past 255.255.255.255")
            counts.append(count)
        hosts: list[LabHostSpec] = []
        port = 0
        next_slot = 1
        next_ue = 1
        for group, count in zip(self.hosts, counts):
            shared_slot = None
            if group.role == "client" and group.access == "shared":
                shared_slot, next_slot = next_slot, next_slot + 1
            for i in range(count):
                port += 1
                name = group.name if count == 1 and group.count == 1 else f"{group.name}{i + 1}"
                ip = group.ip + i
                slot = ue = None
                if group.role == "client":
                    if shared_slot is not None:
                        slot, ue = shared_slot, 0     # one queue for the group, no radio of its own
                    else:
                        slot, next_slot = next_slot, next_slot + 1
                        ue, next_ue = next_ue, next_ue + 1
                    if slot > MAX_SLOT:
                        raise TopologyError(f"topology {self.name!r}: more than {MAX_SLOT} client slots")
                hosts.append(LabHostSpec(name, group.role, str(ip), _mac(port), port, slot, ue,
                                         router=group.router, group=group.name))
        # Every routed host's own access link: slot numbers after the clients' slots.
        for i, h in enumerate(hosts):
            if h.router is not None:
                if next_slot > MAX_SLOT:
                    raise TopologyError(f"topology {self.name!r}: more than {MAX_SLOT} slots and links")
                hosts[i] = replace(h, link=next_slot)
                next_slot += 1
        topo = Topology(self.name, self.description, self.prefix_len, params, tuple(hosts))
        topo.check()
        # After the other checks (what they name is as wrong), before any namespace is made.
        if len(hosts) > MAX_HOSTS:
            raise TopologyError(f"topology {self.name!r}: {len(hosts)} hosts "
                                f"({', '.join(f'{g.name} {n}' for g, n in zip(self.hosts, counts))}), "
                                f"at most {MAX_HOSTS}: each host takes a switch port, and the "
                                f"switch's ports are 1..{MAX_HOSTS} (9 bits, 510 its CPU port)")
        return topo


def _reserved_why(name: str) -> str:
    if name == SWITCH_NAME:
        return "the name of the lab's switch"
    return ("a command of the lab's CLI (`HOST COMMAND` lines could not reach a host of that "
            "name)")


def _mac(port: int) -> str:
    # Locally administered, unique per switch port (the switch forwards on these).
    return f"02:00:00:00:{port >> 8:02x}:{port & 0xFF:02x}"


@dataclass(frozen=True)
class LabHostSpec:
    name: str
    role: str               # client | server
    ip: str
    mac: str
    port: int               # switch port
    slot: int | None        # clients: their access link (slots.py), 1..MAX_SLOT
    ue: int | None          # clients: UE id (0: none of its own)
    router: str | None = None   # routed hosts: the router (host name) they reach others via
    link: int | None = None     # routed hosts: the slot of their own link to the router
    group: str = ""             # the host group it came from


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    prefix_len: int
    params: dict[str, int]
    hosts: tuple[LabHostSpec, ...]

    @property
    def clients(self) -> list[LabHostSpec]:
        return [h for h in self.hosts if h.role == "client"]

    @property
    def servers(self) -> list[LabHostSpec]:
        return [h for h in self.hosts if h.role == "server"]

    @property
    def routers(self) -> list[LabHostSpec]:
        return [h for h in self.hosts if h.role == "router"]

    @property
    def slots(self) -> list[int]:
        return sorted({h.slot for h in self.clients if h.slot is not None})

    @property
    def links(self) -> list[int]:
        """The slots of the routed hosts' own links (empty without routers)."""
        return sorted(h.link for h in self.hosts if h.link is not None)

    def block(self, hosts: list[LabHostSpec]) -> ipaddress.IPv4Network:
        """The smallest prefix holding `hosts`' addresses; no other host may be in it."""
        addrs = [ipaddress.IPv4Address(h.ip) for h in hosts]
        block = ipaddress.IPv4Network(min(addrs))
        while max(addrs) not in block:
            block = block.supernet()
        names = {h.name for h in hosts}
        inside = [h.name for h in self.hosts if h.name not in names and ipaddress.IPv4Address(h.ip) in block]
        if inside:
            raise TopologyError(f"topology {self.name!r}: {', '.join(sorted(names))} need an "
                                f"address block of their own, but {block} holds "
                                f"{', '.join(inside)} too; give them addresses in an aligned block")
        return block

    def routes(self) -> dict[str, list[tuple[str, str]]]:
        """Host or router name -> [(prefix, gateway address)]: a routed host sends every other
        routed group's block via its router; a router sends each block behind another router
        via that router. Empty without routers."""
        routed = [h for h in self.hosts if h.router is not None]
        groups: dict[str, list[LabHostSpec]] = {}
        for h in routed:
            groups.setdefault(h.group, []).append(h)
        behind = {g: (str(self.block(hs)), hs[0].router) for g, hs in groups.items()}
        out: dict[str, list[tuple[str, str]]] = {}
        for h in routed:
            out[h.name] = [(prefix, self.ip_of(h.router)) for g, (prefix, r) in behind.items()
                           if r != h.router]
        for r in self.routers:
            out[r.name] = [(prefix, self.ip_of(via)) for g, (prefix, via) in behind.items()
                           if via != r.name]
        return out

    def ip_of(self, name: str) -> str:
        return self.host(name).ip

    def address_block(self, slot: int) -> ipaddress.IPv4Network:
        """The smallest prefix holding the addresses of every client of `slot`: a shared slot's
        traffic is what comes from it (uplink) and goes to it (downlink), one classifier entry
        each whatever the number of clients, so no other host may be in it."""
        hosts = [h for h in self.clients if h.slot == slot]
        if not hosts:
            raise KeyError(f"topology {self.name!r} has no slot {slot}; slots: {self.slots}")
        try:
            return self.block(hosts)
        except TopologyError as exc:
            raise TopologyError(str(exc).replace(f"{', '.join(sorted(h.name for h in hosts))} need",
                                                 f"the clients sharing slot {slot} need")) from None

    def relocated(self, index: int) -> "Topology":
        """The same lab in the `index`-th subnet after its own (index 0: unchanged), so that
        labs running side by side on one machine (parallel experiment runs) never share an
        address, even in captures and logs that are read together."""
        if index == 0:
            return self
        size = 1 << (32 - self.prefix_len)
        shift = index * size
        top = max(int(ipaddress.IPv4Address(h.ip)) for h in self.hosts)
        if top + shift > int(ipaddress.IPv4Address("255.255.255.255")):
            raise TopologyError(f"topology {self.name!r}: lab {index} would move its hosts past "
                                "255.255.255.255, outside private address space")
        hosts = tuple(replace(h, ip=str(ipaddress.IPv4Address(h.ip) + shift)) for h in self.hosts)
        for h in hosts:
            if not ipaddress.IPv4Address(h.ip).is_private:
                raise TopologyError(f"topology {self.name!r}: lab {index} would move {h.name} to "
                                    f"{h.ip}, outside private address space")
        topo = replace(self, hosts=hosts)
        topo.check()
        return topo

    def host(self, name: str) -> LabHostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"topology {self.name!r} has no host {name!r}; hosts: "
                       f"{', '.join(h.name for h in self.hosts)}")

    def check(self) -> None:
        names = [h.name for h in self.hosts]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise TopologyError(f"topology {self.name!r}: host names repeat: {sorted(dup)} (a group "
                                "NAME of N hosts is NAME1..NAMEN)")
        # A group's own name is checked where it is read; `s` with count 2 still makes an `s1`.
        taken = [h for h in self.hosts if h.name in RESERVED_NAMES]
        if taken:
            h = taken[0]
            raise TopologyError(f"topology {self.name!r}: host {h.name!r} (group {h.group!r}) is "
                                f"{_reserved_why(h.name)}: name the group otherwise")
        net = None
        for h in self.hosts:
            addr = ipaddress.IPv4Interface(f"{h.ip}/{self.prefix_len}")
            net = net or addr.network
            if addr.network != net or addr.ip in (net.network_address, net.broadcast_address):
                raise TopologyError(f"topology {self.name!r}: {h.name} address {h.ip} is not a "
                                    f"host address of {net} (all hosts share one subnet)")
        by_ip: dict[str, list[str]] = {}
        for h in self.hosts:
            by_ip.setdefault(h.ip, []).append(h.name)
        clashes = [f"{' and '.join(names)} on {ip}" for ip, names in by_ip.items() if len(names) > 1]
        if clashes:
            more = f" (and {len(clashes) - 3} more)" if len(clashes) > 3 else ""
            raise TopologyError(f"topology {self.name!r}: addresses repeat: "
                                f"{'; '.join(clashes[:3])}{more}; a group of N counts up N "
                                "addresses from its `ip`")
        for slot in self.slots:
            if sum(h.slot == slot for h in self.clients) > 1:
                self.address_block(slot)
        self.routes()           # every routed group has a block of its own

    def to_json(self) -> dict:
        return {"name": self.name, "params": self.params, "prefix_len": self.prefix_len,
                "hosts": [h.__dict__ for h in self.hosts]}


def topology_names(directory: Path | None = None) -> list[str]:
    d = directory or topologies_dir()
    return sorted(p.stem for p in d.glob("*.yaml"))


def load_topology(name_or_path: str | Path, directory: Path | None = None) -> TopologySpec:
    """A topology by name (topologies/NAME.yaml) or from a YAML file path."""
    path = Path(name_or_path)
    given = path.suffix or "/" in str(name_or_path)   # a file the user named, not a name
    if not given:
        path = (directory or topologies_dir()) / f"{name_or_path}.yaml"
    if not path.exists():
        what = f"no topology file {str(name_or_path)!r}" if given else f"no topology {str(name_or_path)!r}"
        raise TopologyError(f"{what}; known: {', '.join(topology_names(directory)) or 'none'} "
                            "(a name in topologies/ or a YAML file's path)")
    try:
        data = safe_yaml.load_file(path)
    except YamlInputError as exc:
        raise TopologyError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{path}: cannot read: {exc}") from None
    try:
        spec = TopologySpec.model_validate(data)
    except ValidationError as exc:
        lines = [f"{'.'.join(str(p) for p in e['loc']) or '(the document)'}: {e['msg']}"
                 for e in exc.errors()]
        raise TopologyError(f"{path}: invalid topology:\n  " + "\n  ".join(lines)) from None
    if given:
        spec._source = path
    return spec
