"""The smallest lab: two hosts in namespaces, h1 (10.0.0.1) and h2 (10.0.0.2), wired through one
p4netem-switch on two veth pairs (h1 on switch port 1, h2 on port 2), configured over P4Runtime.

Traffic entering port 1 is classified as profile LAB_PROFILE uplink, traffic entering port 2 as
LAB_PROFILE downlink; `impair()` sets the impairment of one direction. Hosts have static ARP entries
and IPv6 off, so the only packets crossing the switch are the ones a test sends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from .. import pipeline as pl
from ..p4rt import GrpcTls, P4Info, P4RuntimeClient, P4RuntimeError, WriteError
from ..paths import p4info_path
from ..stats import PdCounters, read_pd_counters
from .netns import PREFIX, Namespace, Resources, disable_offloads, run, unique_token
from .switch import SwitchProcess, SwitchTls

if TYPE_CHECKING:
    from ..profiles import Profile

LAB_PROFILE = 1
CPU_PORT = 510  # P4 port that stands for the controller (PacketIn/PacketOut); not a host port


@dataclass(frozen=True)
class Host:
    name: str
    ns: Namespace
    iface: str  # inside ns
    ip: str
    mac: str
    switch_port: int
    switch_iface: str  # the veth end the switch uses, in the root namespace


class TwoHostLab:
    def __init__(
        self,
        seed: int | None = 1,
        binary: str | Path | None = None,
        p4info: str | Path | None = None,
        log_path: str | Path | None = None,
        switch_args: tuple[str, ...] = (),
        cpu_port: int | None = CPU_PORT,
        switch_tls: SwitchTls | None = None,
        client_tls: GrpcTls | None = None,
    ):
        self.seed = seed
        self.binary = binary
        self.p4info_file = Path(p4info) if p4info else p4info_path()
        self.log_path = log_path
        self.switch_args = switch_args
        # TLS of the switch's P4Runtime server and of the lab's own client (docs/security.md).
        self.switch_tls = switch_tls
        self.client_tls = client_tls
        self.cpu_port = cpu_port
        self.token = unique_token()
        # Recorded (lab/owner.py), so that a test run killed outright is cleaned up by the next.
        self.resources = Resources(owner_prefix=f"{PREFIX}{self.token}", kind="twohost")
        self.hosts: list[Host] = []
        self.switch: SwitchProcess | None = None
        self.client: P4RuntimeClient | None = None
        self._impaired: set[int] = set()

    @property
    def h1(self) -> Host:
        return self.hosts[0]

    @property
    def h2(self) -> Host:
        return self.hosts[1]

    def start(self) -> TwoHostLab:
        try:
            self._build_hosts()
            self.switch = SwitchProcess(
                {h.switch_port: h.switch_iface for h in self.hosts},
                binary=self.binary,
                seed=self.seed,
                cpu_port=self.cpu_port,
                log_path=self.log_path,
                extra_args=self.switch_args,
                tls=self.switch_tls,
                resources=self.resources,
            ).start()
            self.client = P4RuntimeClient(self.switch.grpc_addr, device_id=self.switch.device_id,
                                          tls=self.client_tls).connect()
            if not self.client.is_primary:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "lab client did not become primary")
            self._configure()
        except BaseException:
            self.close()
            raise
        return self

    def _build_hosts(self) -> None:
        for number in (1, 2):
            ns = self.resources.namespace(f"{PREFIX}{self.token}h{number}")
            host = Host(
                name=f"h{number}",
                ns=ns,
                iface="eth0",
                ip=f"10.0.0.{number}",
                mac=f"02:00:00:00:00:0{number}",
                switch_port=number,
                switch_iface=f"{PREFIX}{self.token}s{number}",
            )
            self._wire(host)
            self.hosts.append(host)
        for a, b in ((self.h1, self.h2), (self.h2, self.h1)):
            self._neighbour(a, b)

    def _wire(self, host: Host, mtu: int | None = None) -> None:
        """The veth pair between the switch and a host, configured (both ends at `mtu`, if given)
        and up."""
        self.resources.veth(host.switch_iface, host.iface, None, host.ns)
        if mtu is not None:
            run(["ip", "link", "set", host.switch_iface, "mtu", str(mtu)])
            host.ns.run(["ip", "link", "set", host.iface, "mtu", str(mtu)])
        # IPv6 off before the links come up, so no router solicitation or MLD report crosses.
        run(["sysctl", "-qw", f"net.ipv6.conf.{host.switch_iface}.disable_ipv6=1"])
        host.ns.run(["sysctl", "-qw", f"net.ipv6.conf.{host.iface}.disable_ipv6=1"])
        host.ns.run(["ip", "link", "set", host.iface, "address", host.mac])
        host.ns.run(["ip", "addr", "add", f"{host.ip}/24", "dev", host.iface])
        disable_offloads(host.iface, host.ns.name)
        disable_offloads(host.switch_iface)
        host.ns.run(["ip", "link", "set", host.iface, "up"])
        run(["ip", "link", "set", host.switch_iface, "up"])

    @staticmethod
    def _neighbour(a: Host, b: Host) -> None:
        """A static ARP entry on `a` for `b` (no ARP crosses the switch)."""
        a.ns.run(["ip", "neigh", "replace", b.ip, "lladdr", b.mac, "dev", a.iface, "nud", "permanent"])

    def unplug(self, host: Host) -> None:
        """Deletes the veth pair between the switch and `host` (both ends go): the switch's port
        loses its interface, as when a container runtime removes a veth."""
        run(["ip", "link", "del", host.switch_iface])

    def replug(self, host: Host, mtu: int | None = None) -> None:
        """Wires an unplugged host again as at start: a new veth pair of the same names, moved,
        addressed and configured the same way (as a container runtime re-creating it); with `mtu`,
        both ends have it before they come up."""
        self._wire(host, mtu)
        other = self.h2 if host is self.h1 else self.h1
        self._neighbour(host, other)

    def _configure(self) -> None:
        client = self.client
        assert client is not None
        if self.p4info_file.exists():
            client.set_pipeline(P4Info.load(self.p4info_file))
        else:
            client.fetch_pipeline()
        entries = [
            client.table_entry(pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SET_EGRESS_PORT, {"port": 2}),
            client.table_entry(pl.PORT_MAP, {"standard_metadata.ingress_port": 2}, pl.SET_EGRESS_PORT, {"port": 1}),
        ]
        for port, direction in ((1, pl.UPLINK), (2, pl.DOWNLINK)):
            entries.append(
                client.table_entry(
                    pl.CLASSIFIER,
                    {"standard_metadata.ingress_port": port},
                    pl.SET_PROFILE,
                    {"profile_id": LAB_PROFILE, "direction": direction, "ue_id": 0},
                    priority=10,
                )
            )
        client.insert(*entries)

    def impair(self, direction: int = pl.UPLINK, **params: int) -> None:
        """Set the impairment of LAB_PROFILE in one direction (unnamed parameters are 0: off)."""
        client = self.client
        assert client is not None
        entry = client.table_entry(
            pl.PROFILE,
            {"meta.profile_id": LAB_PROFILE, "meta.direction": direction},
            pl.SET_IMPAIRMENT,
            pl.impairment_params(**params),
        )
        if direction in self._impaired:
            client.modify(entry)
            return
        try:
            client.insert(entry)
        except WriteError as err:
            if err.code != grpc.StatusCode.ALREADY_EXISTS and not any(
                e.code == grpc.StatusCode.ALREADY_EXISTS for e in err.errors
            ):
                raise
            client.modify(entry)
        self._impaired.add(direction)

    def apply_profile(self, profile: "Profile") -> None:
        """Program a whole profile (both directions and its radio) as LAB_PROFILE, in one Write."""
        from ..profiles.program import write_profile

        assert self.client is not None
        write_profile(self.client, profile, LAB_PROFILE)
        self._impaired.update((pl.UPLINK, pl.DOWNLINK))

    def pd(self, direction: int) -> int:
        return pl.pd_index(LAB_PROFILE, direction)

    def counters(self, direction: int) -> PdCounters:
        assert self.client is not None
        return read_pd_counters(self.client, self.pd(direction))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.switch is not None:
            self.switch.stop()
        self.resources.close()

    def __enter__(self) -> TwoHostLab:
        if not self.hosts:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
