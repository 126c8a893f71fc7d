"""A Mininet lab around one P4 switch, built from a topology, programmed over P4Runtime.

    with MininetLab(load_topology("inline").expand()) as lab:
        lab.apply_profile(builtin_profile("hspa"), radio=True)
        lab.run("client", ["ping", "-c", "3", lab.ip("server")])

Everything the lab creates carries a token unique to it: namespace names `p4n<token><host>`
(Mininet's host namespaces, named with `ip netns attach`) and switch-side interface names
`p4n<token>p<port>` (p4netem.lab.tokens: no token begins another, and the longest name, port
509, has Linux's 15 characters). `close()` (also from `with`, at interpreter exit, and after
Ctrl-C) stops the switch, ends every process in the lab's namespaces, deletes its links and
namespace names, then checks that nothing with its token is left (`leftovers()`).

A SIGKILL leaves no chance to close: so before it builds anything a lab removes the labs of dead
owners (`p4netem.lab.clean_dead_labs`), starts its owner's reaper (`p4netem.lab.reaper`: it
removes the lab within seconds of the owner's death) and records itself (owner pid and start
time, its prefix, the names of its namespaces and links, the switch's pid) in
`p4netem.lab.owner.run_dir()`; the record goes when close() leaves nothing.

The switch is programmed through the controller (p4netem.control), as any other user would:
it forwards by destination MAC (`l2_fwd`, one entry per host; hosts have static ARP entries and no
IPv6, so no broadcast is needed), and each slot (a client's access link) is a controller rule
carrying the client's UE id, plus a rule for its DNS lookups (slots.py). Profiles switch
atomically; `reset_radio` idles a slot's radio (p4netem.radio.idle).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

from p4netem.control import Controller
from p4netem.lab.netns import PREFIX, LabError, disable_offloads, run, unique_token
from p4netem.lab.owner import LabRecord, clean_dead_labs, netns_names, open_record
from p4netem.lab.owner import links as root_links
from p4netem.p4rt import P4Info, P4RuntimeClient, P4RuntimeError
from p4netem.p4rt.bmv2_registers import Bmv2RuntimeCli, registers_over_p4runtime
from p4netem.paths import p4info_path
from p4netem.profiles import Profile
from p4netem.radio import IdledUe
from p4netem.stats import PdCounters, read_pd_counters
from .slots import AppliedProfile, SlotProfiles
from .topology import Topology

from . import stdlib_distutils

stdlib_distutils.load()
try:
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.topo import Topo
except ImportError as exc:  # pragma: no cover - depends on the interpreter
    raise ImportError("Mininet is not importable: it is Debian's python3-mininet, visible to "
                      "/usr/bin/python3 and to the project venv (made with "
                      "--system-site-packages); run with .venv/bin/python") from exc

from .nodes import Bmv2Switch, LabHost, P4NetemSwitch, kill_netns_processes, netns_pids

TARGETS = {"p4netem": P4NetemSwitch, "bmv2": Bmv2Switch}

_open_labs: "weakref.WeakSet[MininetLab]" = weakref.WeakSet()
log = logging.getLogger(__name__)


class MininetLab:
    def __init__(self, topology: Topology, *, target: str = "p4netem",
                 pcap_dir: str | Path | None = None, log_dir: str | Path | None = None,
                 seed: int | None = 1, binary: str | Path | None = None,
                 switch_args: tuple[str, ...] = (), mininet_log: str = "warning"):
        if target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
        if os.geteuid() != 0:
            raise LabError("Mininet labs need root (namespaces, raw sockets)")
        self.topology = topology
        self.target = target
        self.pcap_dir = Path(pcap_dir) if pcap_dir else None
        self.log_dir = Path(log_dir) if log_dir else None
        self.seed = seed
        self.binary = binary
        self.switch_args = tuple(switch_args)
        self.mininet_log = mininet_log
        self.token = unique_token()
        self.net: Mininet | None = None
        self.client: P4RuntimeClient | None = None
        self.controller: Controller | None = None
        self.slots: SlotProfiles | None = None
        self.dns_latency_ns = 0
        self.record: LabRecord | None = None
        self._closed = False

    # ---- names -----------------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return f"{PREFIX}{self.token}"

    def ns(self, host: str) -> str:
        """The named network namespace of host `host` (for `ip netns exec`)."""
        self.topology.host(host)
        return f"{self.prefix}{host}"

    def ip(self, host: str) -> str:
        return self.topology.host(host).ip

    def node(self, host: str) -> LabHost:
        assert self.net is not None, "lab not started"
        return self.net[host]

    @property
    def switch(self) -> P4NetemSwitch | Bmv2Switch:
        assert self.net is not None, "lab not started"
        return self.net["s1"]

    def _switch_intf(self, port: int) -> str:
        return f"{self.prefix}p{port}"

    # ---- life cycle ------------------------------------------------------------------------------
    def start(self) -> "MininetLab":
        _open_labs.add(self)
        # What runs killed outright left behind, never a live run's (their owners are checked).
        for line in clean_dead_labs().lines():
            # Mininet's logger class (every logger made after mininet.log's import) ends no line.
            log.warning("removed a dead lab: %s\n", line)
        self.record = open_record(self.prefix, "mininet")
        if self.record is not None:
            # Every name it will make, before it makes one: a cleaner removes what a record lists.
            self.record.add_names([self.ns(h.name) for h in self.topology.hosts],
                                  [self._switch_intf(h.port) for h in self.topology.hosts])
        try:
            self._build()
            self._program_switch()
        except BaseException:
            try:
                self.close()
            except Exception as cleanup:  # noqa: BLE001 - the start's error is the one to raise
                # A failing close must not replace what made the start fail (it did: a lab of 511
                # hosts reported only its switch's slow stop, never the port the switch refused).
                log.warning("%s\n", cleanup)
            raise
        return self

    def _topo(self) -> Topo:
        topo = Topo()
        sw_opts: dict = {"cls": TARGETS[self.target]}
        log_path = None
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_path = str(self.log_dir / "switch.log")
        if self.target == "p4netem":
            # forwarding=False: the lab programs the switch itself (set_pipeline, then its rules).
            sw_opts.update(seed=self.seed, binary=str(self.binary) if self.binary else None,
                           switch_args=self.switch_args, forwarding=False)
        if self.record is not None:
            # The switch runs in the root namespace: recorded by pid the moment it starts.
            sw_opts.update(on_start=self.record.add_process)
        sw_opts.update(pcap_dir=str(self.pcap_dir) if self.pcap_dir else None, log_path=log_path)
        topo.addSwitch("s1", **sw_opts)
        for h in self.topology.hosts:
            # own_record=False: this lab's record lists every host's namespace (start()).
            topo.addHost(h.name, cls=LabHost, netns=self.ns(h.name), own_record=False,
                         ip=f"{h.ip}/{self.topology.prefix_len}", mac=h.mac)
            topo.addLink(h.name, "s1", port1=0, port2=h.port, intfName1="eth0",
                         intfName2=self._switch_intf(h.port))
        return topo

    def _build(self) -> None:
        setLogLevel(self.mininet_log)
        # Mininet.init() would raise machine-wide limits and sysctls (fixLimits) on a machine other
        # people use, and change TCP defaults the results record; the lab sets what it needs per
        # namespace instead.
        Mininet.inited = True
        self.net = Mininet(topo=self._topo(), controller=None, autoStaticArp=False, build=False,
                           waitConnected=False)
        self.net.build()
        self._static_arp()
        for h in self.topology.hosts:
            # Real checksums and wire-sized segments from the hosts too (the switch forwards raw
            # frames between veths).
            disable_offloads("eth0", self.ns(h.name))
            run(["sysctl", "-qw", f"net.ipv6.conf.{self._switch_intf(h.port)}.disable_ipv6=1"])
        self.net.start()
        self._route()

    def _static_arp(self) -> None:
        """Every host gets a permanent ARP entry for every other host (the switch floods nothing):
        one `ip -batch` per host. Mininet's own (autoStaticArp) runs `arp -s` through the host's
        shell once per pair of hosts, 6.6 ms each here: 24 s of the 40 s a 61-host lab took to
        come up, and about half an hour for 509 hosts."""
        hosts = self.topology.hosts
        for h in hosts:
            batch = "".join(f"neigh replace {o.ip} lladdr {o.mac} dev eth0 nud permanent\n"
                            for o in hosts if o is not h)
            argv = ["ip", "-n", self.ns(h.name), "-batch", "-"]
            proc = subprocess.run(argv, input=batch, capture_output=True, text=True, timeout=60)
            if proc.returncode != 0:
                raise LabError(f"command failed ({proc.returncode}): {' '.join(argv)}\n"
                               f"{proc.stderr.strip()}")

    def _route(self) -> None:
        """Routed topologies (the dumbbell): routers forward IPv4 and send no ICMP redirects
        (they forward out of the port a packet came in on, and a redirect would teach the host
        to go around them, and around the hops' profiles); no host accepts one either. Then
        every host and router gets its routes (Topology.routes)."""
        routes = self.topology.routes()
        if not routes:
            return
        for h in self.topology.hosts:
            ns = self.ns(h.name)
            flags = [f"net.ipv4.conf.{i}.accept_redirects=0" for i in ("all", "default", "eth0")]
            if h.role == "router":
                flags += ["net.ipv4.ip_forward=1"]
                flags += [f"net.ipv4.conf.{i}.send_redirects=0" for i in ("all", "default", "eth0")]
            run(["sysctl", "-qw", *flags], ns)
            for prefix, via in routes.get(h.name, []):
                run(["ip", "route", "replace", prefix, "via", via, "dev", "eth0"], ns)

    def _program_switch(self) -> None:
        sw = self.switch
        # The switch answers P4Runtime once all its ports are up, brought up one after the other
        # (30-110 ms each here under load: 12 s for 151 ports), so the client's default 10 s
        # refused big labs whose switch was fine.
        ports = len(self.topology.hosts)
        try:
            self.client = P4RuntimeClient(sw.grpc_addr, device_id=sw.device_id,
                                          connect_timeout=30.0 + 0.5 * ports).connect()
        except P4RuntimeError as exc:
            tail = sw.log_tail() if hasattr(sw, "log_tail") else ""
            raise LabError(f"the lab's switch ({ports} ports) did not answer P4Runtime: {exc}"
                           + (f"; the end of its log:\n{tail}" if tail else "")) from None
        # A target compiled with other sizes (bmv2: -DUE_COUNT=...) runs its own P4Info.
        info = P4Info.load(getattr(sw, "compiled_p4info", None) or p4info_path())
        self.client.set_pipeline(info, sw.device_config())
        # What the switch supports decides, not its name: registers over P4Runtime or through
        # the Thrift runtime (bmv2's PI server implements none); the strongest Write atomicity
        # is learned from the first UNIMPLEMENTED (control/session.py), and all-or-nothing is
        # done by the controller where the target has only CONTINUE_ON_ERROR.
        if not registers_over_p4runtime(self.client):
            port = getattr(sw, "thrift_port", None)
            if port is None:
                raise LabError(f"the switch at {sw.grpc_addr} implements no P4Runtime register access and "
                               "offers no Thrift runtime port to reach its registers")
            self.client.register_backend = Bmv2RuntimeCli(port)
        self.controller = Controller(self.client)
        self.controller.set_l2_forwarding({h.mac: h.port for h in self.topology.hosts})
        self.slots = SlotProfiles(self.controller, self.topology)

    # ---- impairments -----------------------------------------------------------------------------
    def apply_profile(self, profile: Profile, *, radio: bool = False,
                      hosts: list[str] | None = None) -> list[AppliedProfile]:
        """Put the access links of `hosts` (default: every client) on `profile`, all at once.

        Each slot's DNS lookups get the same profile plus half the DNS latency each way (so a
        lookup takes one access RTT plus the DNS latency)."""
        assert self.slots is not None, "lab not started"
        clients = ([self.topology.host(n) for n in hosts] if hosts else self.topology.clients)
        slots = sorted({h.slot for h in clients if h.slot is not None})
        return self.slots.apply(slots, profile, radio=radio, dns_extra_ns=self.dns_latency_ns // 2)

    def set_dns_latency(self, latency_ns: int) -> None:
        """Extra round-trip time of DNS lookups (now on the slots that have a profile, and with
        every later apply_profile)."""
        if latency_ns < 0:
            raise ValueError(f"DNS latency must be >= 0, not {latency_ns} ns")
        self.dns_latency_ns = int(latency_ns)
        assert self.slots is not None
        for slot, rec in list(self.slots.applied.items()):
            self.slots.apply([slot], rec.profile, radio=rec.radio.requested,
                             dns_extra_ns=self.dns_latency_ns // 2)

    def reset_radio(self, slot: int) -> list[IdledUe]:
        """Put the radio of the slot's UE back in IDLE at once, so the next packet pays the whole
        promotion (p4netem.radio.idle: register writes equivalent to a demotion). Call it while
        the slot has no traffic (after wait_quiet)."""
        assert self.slots is not None, "lab not started"
        return self.slots.idle_radio(slot)

    def apply_link_profile(self, profile: Profile, hosts: list[str] | None = None
                           ) -> list[AppliedProfile]:
        """Routed topologies: put the own access links of `hosts` (default: every routed host,
        clients and servers) on `profile`, all at once; no radio, no DNS rule."""
        assert self.slots is not None, "lab not started"
        chosen = [self.topology.host(n) for n in hosts] if hosts else list(self.topology.hosts)
        links = sorted(h.link for h in chosen if h.link is not None)
        if not links:
            raise ValueError(f"topology {self.topology.name!r} has no host links (no routers)")
        return self.slots.apply(links, profile)

    def link_counters(self, host: str) -> dict[int, PdCounters]:
        """Direction -> the switch's counters of `host`'s own link (uplink: what it sends)."""
        assert self.slots is not None, "lab not started"
        link = self.topology.host(host).link
        if link is None:
            raise ValueError(f"{host} has no link of its own (topology {self.topology.name!r})")
        return self.slots.counters(link)

    def counters(self, host: str) -> dict[int, PdCounters]:
        """Direction -> the switch's counters of the access link of client `host`."""
        assert self.slots is not None, "lab not started"
        slot = self.topology.host(host).slot
        if slot is None:
            raise ValueError(f"{host} is not a client: it has no access link")
        return self.slots.counters(slot)

    def wait_quiet(self, quiet_s: float, timeout_s: float = 60.0,
                   slots: list[int] | None = None) -> float:
        """Block until the clients' slots have held no packet and seen none arrive for `quiet_s`
        seconds (every packet in has gone out or was dropped, per the switch's own counters);
        returns the seconds waited. A load that ends with retransmissions still queued on a slow
        link would otherwise delay the next load's first packets."""
        assert self.client is not None and self.slots is not None
        pds = self.slots.pds(slots)
        t0 = time.monotonic()
        last_in = None
        quiet_since = t0
        while True:
            counters = [self._read_counters_patiently(pd) for pd in pds]
            seen = sum(c.profile_in for c in counters)
            held = any(c.conservation_gap() for c in counters)
            now = time.monotonic()
            if held or seen != last_in:
                quiet_since = now
            last_in = seen
            if now - quiet_since >= quiet_s or now - t0 >= timeout_s:
                return now - t0
            time.sleep(min(0.1, quiet_s / 4))

    def _read_counters_patiently(self, pd, tries: int = 4):
        """One counter read, tried again when it times out: on a machine loaded far beyond its
        cores (parallel labs and other work) a read can miss its deadline although the switch
        is fine, and losing the lab (and the load) for that would be worse than waiting."""
        for attempt in range(tries):
            try:
                return read_pd_counters(self.client, pd)
            except Exception as exc:      # P4RuntimeError or grpc.RpcError, by client version
                text = str(exc)
                if attempt == tries - 1 or not any(c in text for c in ("DEADLINE_EXCEEDED",
                                                                      "UNAVAILABLE")):
                    raise
                time.sleep(0.5 * (attempt + 1))

    def profiles(self) -> dict[int, AppliedProfile]:
        """Slot -> the profile it runs (as last applied)."""
        assert self.slots is not None
        return dict(self.slots.applied)

    # ---- running things --------------------------------------------------------------------------
    def run(self, host: str, argv: list[str], check: bool = True, timeout: float = 60):
        return run(argv, self.ns(host), check=check, timeout=timeout)

    # ---- cleanup ---------------------------------------------------------------------------------
    def leftovers(self) -> dict[str, list[str]]:
        """Namespaces, links and processes of this lab still on the machine (empty after close).

        By the names this lab gives (one namespace per host, one switch-side link per port): what
        close() deletes is exactly what this lab made. (Tokens are now fixed-width, so none
        begins another; they were not, and a prefix of `2s1` also matched lab `2s10`'s names.)"""
        ours_ns = {self.ns(h.name) for h in self.topology.hosts}
        ours_links = {self._switch_intf(h.port) for h in self.topology.hosts}
        mine_ns = [n for n in netns_names() if n in ours_ns]
        mine_links = [l for l in root_links() if l in ours_links]
        procs = []
        sw = self.net.nameToNode.get("s1") if self.net is not None else None
        if isinstance(sw, P4NetemSwitch) and sw.process and sw.process.running():
            procs.append(f"p4netem-switch pid {sw.process.proc.pid}")
        for ns in mine_ns:
            procs += [f"pid {p} in {ns}" for p in netns_pids(ns)]
        return {k: v for k, v in (("namespaces", mine_ns), ("links", mine_links),
                                  ("processes", procs)) if v}

    def close(self) -> None:
        # A second Ctrl-C (or a SIGTERM) during the close raised in the middle of it and left the
        # rest of the lab behind, while `lab up` said "lab removed": signals wait for the close.
        with _signals_held():
            if self._closed:
                return
            self._closed = True
            self._close()

    def _close(self) -> None:
        errors = []
        if self.client is not None:
            try:
                self.client.close()
            except Exception as exc:  # noqa: BLE001 - cleanup goes on
                errors.append(f"P4Runtime client: {exc}")
            self.client = None
        if self.net is not None:
            self._end_running_commands()
            try:
                self.net.stop()
            except Exception as exc:  # noqa: BLE001
                errors.append(f"mininet stop: {exc}")
            sw = self.net.nameToNode.get("s1")
            if isinstance(sw, P4NetemSwitch) and sw.process and sw.process.running():
                try:
                    sw.stop(deleteIntfs=False)   # net.stop failed before it reached the switch
                except Exception as exc:  # noqa: BLE001 - the sweep below must still run
                    errors.append(f"switch: {exc}")
        # Whatever a failed start or stop left: our namespace names and links, by token.
        left = self.leftovers()
        # All namespaces' processes at once: the hosts' shells ignore SIGTERM and wait out the
        # grace, so one namespace after the other took 4 s each (34 min for 509 hosts).
        kill_netns_processes(left.get("namespaces", []))
        for ns in left.get("namespaces", []):
            run(["ip", "netns", "delete", ns], check=False)
        for link in left.get("links", []):
            run(["ip", "link", "delete", link], check=False)
        if self.record is not None and not self.leftovers():
            self.record.remove()  # else the next run removes what is left, once we are gone
        _open_labs.discard(self)
        if errors:
            raise LabError("lab cleanup: " + "; ".join(errors))

    def _end_running_commands(self) -> None:
        """A host whose shell is still running a CLI command (the CLI was left by an exception)
        cannot take Mininet's cleanup commands: end what runs in its namespace, then let the
        shell print its prompt."""
        assert self.net is not None
        for node in list(self.net.hosts):
            if getattr(node, "waiting", False) and node.shell is not None:
                kill_netns_processes(node.netns, spare=(node.pid,))
                try:
                    node.sendInt()
                    node.waitOutput()
                except Exception:  # noqa: BLE001 - terminate() ends the shell anyway
                    node.waiting = False

    def __enter__(self) -> "MininetLab":
        if self.net is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP until the block is done, then deliver the first that came
    to the handler it would have reached (KeyboardInterrupt, `Terminated`, ...). Python runs
    signal handlers in the main thread only, and only there can they be set: elsewhere nothing
    is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(sig)
        if handler in (signal.SIG_IGN, None):
            continue                  # ignored (nohup, a background job) or not Python's: as it is
        saved[sig] = handler
        signal.signal(sig, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if came:
            signal.raise_signal(came[0])


@atexit.register
def _close_all() -> None:
    for lab in list(_open_labs):
        try:
            lab.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
