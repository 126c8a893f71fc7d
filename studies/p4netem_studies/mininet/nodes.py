"""Mininet nodes of a p4netem lab: hosts with a named namespace, and the two P4 switches.

Mininet 2.3.0 imports only in Debian's python3 (the project venv sees it through
--system-site-packages). There is no Open vSwitch on this machine and no OpenFlow controller: the
switches here are plain `Switch` subclasses run with `controller=None`, programmed over P4Runtime.

- `LabHost`: a Mininet host whose (otherwise anonymous) namespace is also given a name with
  `ip netns attach`, so every `ip netns exec`-based helper of p4netem_studies.web (servers, loaders,
  captures, TCP tuning) works on it unchanged. Terminating it ends every process left in the
  namespace and removes the name. Outside a MininetLab it keeps a lab record of its own, so that
  its namespace goes with its owner even after a SIGKILL (its reaper, p4netem.lab.reaper).
- `P4NetemSwitch`: runs `p4netem-switch` on its ports (offloads off on both ends of each link,
  its own gRPC port, pcap optional), forwarding by the hosts' MACs from the start, so it works
  in any Mininet script with any host class (docs/labs.md, "Your own Mininet script").
- `Bmv2Switch`: runs bmv2 `simple_switch_grpc` with p4src compiled by `p4c-bm2-ss`, when both are
  installed (they are not installable from this machine's registries; `Bmv2Switch.available()`
  says why not).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections import deque
from pathlib import Path

from . import stdlib_distutils

stdlib_distutils.load()
from mininet.link import Intf  # noqa: E402 (after the above)
from mininet.node import Host, Switch  # noqa: E402

from p4netem.control import Controller
from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import PREFIX, LabError, disable_offloads, run, unique_token
from p4netem.lab.owner import LabRecord, netns_cookie, netns_names, open_record
from p4netem.lab.switch import SwitchProcess
from p4netem.paths import REPO_ROOT

CPU_PORT = 510  # P4 port standing for the controller (PacketIn/PacketOut), as in p4src


def netns_pids(name: str) -> list[int]:
    proc = run(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_netns_processes(names: str | list[str], grace: float = 3.0,
                         spare: tuple[int, ...] = ()) -> list[int]:
    """SIGTERM every process in namespace `names` (one name or several: all at once, one grace
    period for all of them, not one each) but `spare`, SIGKILL what is left after `grace` seconds;
    returns the pids still there.

    Only ever called on namespaces this lab created, so it ends exactly the lab's processes
    (servers, loaders, captures, the host's shell) and nothing else on the machine."""
    names = [names] if isinstance(names, str) else list(names)
    keep = {os.getpid(), *spare}

    def remaining() -> list[int]:
        return [p for name in names for p in netns_pids(name) if p not in keep]

    pids = remaining()
    if not pids:
        return []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 1.0)
        while time.monotonic() < deadline:
            pids = remaining()
            if not pids:
                return []
            time.sleep(0.05)
    return pids


class LabHost(Host):
    """A Mininet host whose namespace also has a name (`netns=`), removed on terminate().

    A name outlives every process of its namespace, so a host whose owner is killed outright
    would leave it: `own_record` (default; MininetLab, whose record lists its hosts' names,
    passes False) records the name, with the namespace's cookie, in a lab record of the host's
    own before naming it, and the owner's reaper removes it after a SIGKILL (p4netem.lab.owner:
    only while the name still holds this namespace, so a later script's namespace of the same
    name is never touched)."""

    def __init__(self, name: str, netns: str, own_record: bool = True, **params):
        self.netns = netns
        self.record: LabRecord | None = None
        super().__init__(name, **params)
        if own_record:
            self.record = open_record(f"{PREFIX}{unique_token()}", "labhost")
        if self.record is not None:
            # The shell's namespace, not yet named: identified before the name exists, so that
            # an owner killed in between leaves no name a cleaner would take for this one.
            self.record.add_namespace(netns, netns_cookie(f"/proc/{self.pid}/ns/net"))
        run(["ip", "netns", "attach", netns, str(self.pid)])

    def config(self, **params):
        result = super().config(**params)
        # Only the packets a lab sends should cross the switch: no IPv6 autoconfiguration, router
        # solicitations or MLD reports.
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        return result

    def terminate(self):
        try:
            # The shell (an interactive bash ignores SIGTERM) is Mininet's to end, with SIGHUP.
            kill_netns_processes(self.netns, spare=(self.pid,) if self.pid else ())
        finally:
            super().terminate()
            kill_netns_processes(self.netns, grace=1.0)
            gone = run(["ip", "netns", "delete", self.netns], check=False).returncode == 0
            if self.record is not None and (gone or self.netns not in netns_names()):
                self.record.remove()    # else the reaper removes the name once the owner is gone
                self.record = None


def link_peer(intf: Intf) -> Intf | None:
    """The interface at the other end of `intf`'s link (None: not on a link)."""
    link = intf.link
    if link is None:
        return None
    return link.intf2 if link.intf1 is intf else link.intf1


class P4NetemSwitch(Switch):
    """p4netem-switch on this node's ports (Mininet port number = P4 port number).

    Parameters (addSwitch keyword arguments): grpc_port (default: a free one), pcap_dir (one pcap
    per port), log_path, binary, seed, device_id, cpu_port, switch_args (extra flags),
    forwarding (default True: at start, every host's MAC -> the port toward it, and ports 1 <-> 2
    as a wire when there are exactly two, which carries ARP; with more ports the switch floods
    nothing, so give the hosts static ARP entries: Mininet(autoStaticArp=True). False: your own
    controller programs it).

    Used in any Mininet script (`Mininet(topo, switch=P4NetemSwitch, controller=None)`), not only
    by MininetLab: it turns offloads off on both ends of its links, the far end from the node
    that owns it (whatever its host class), and the switch process dies with the script even when
    that is killed outright (SwitchProcess(die_with_owner=True)).
    """

    def __init__(self, name: str, grpc_port: int | None = None, pcap_dir: str | None = None,
                 log_path: str | None = None, binary: str | None = None, seed: int | None = 1,
                 device_id: int = 1, cpu_port: int | None = CPU_PORT,
                 switch_args: tuple[str, ...] = (), on_start=None, forwarding: bool = True,
                 **params):
        params.setdefault("dpid", "%016x" % device_id)
        params["inNamespace"] = False   # the switch process runs in the root namespace
        super().__init__(name, **params)
        self.grpc_port = grpc_port
        self.pcap_dir = pcap_dir
        self.log_path = log_path
        self.binary = binary
        self.seed = seed
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.switch_args = tuple(switch_args)
        self.on_start = on_start  # called with the switch's pid as soon as it runs
        self.forwarding = forwarding
        self.process: SwitchProcess | None = None
        self.port_count = 0

    @property
    def grpc_addr(self) -> str:
        assert self.process is not None, "switch not started"
        return self.process.grpc_addr

    def device_config(self) -> bytes:
        """The target config SetForwardingPipelineConfig carries: none, the pipeline is built in."""
        return b""

    def data_ports(self) -> dict[int, str]:
        """P4 port -> interface name, without the control interface (lo, port 0)."""
        return {port: intf.name for port, intf in self.intfs.items() if port > 0}

    def host_ports(self) -> dict[str, int]:
        """MAC of every host interface this switch reaches -> the port toward it: breadth first
        through other switches (fewest switch hops; hosts forward nothing), so every switch of a
        multi-switch topology sends a frame one hop closer to its host."""
        found: dict[str, int] = {}
        seen: set[Switch] = {self}
        todo = deque((peer, port) for port, intf in sorted(self.intfs.items())
                     if port > 0 and (peer := link_peer(intf)) is not None)
        while todo:
            peer, port = todo.popleft()
            node = peer.node
            if isinstance(node, Switch):
                if node not in seen:
                    seen.add(node)
                    todo.extend((far, port) for _, intf in sorted(node.intfs.items())
                                if (far := link_peer(intf)) is not None)
                continue
            # A MAC Mininet did not set (no autoSetMacs) is read from the host's interface.
            mac = peer.MAC() or peer.updateMAC()
            if mac:
                found.setdefault(mac, port)
        return found

    def start(self, controllers) -> None:
        ports = self.data_ports()
        for port, iface in ports.items():
            # The switch refuses ports with segmentation/checksum offloads on (it would forward
            # super-packets and bad checksums); the far end must be off too, or its frames reach
            # the switch with checksums left to the hardware: ping works but TCP hardly does.
            disable_offloads(iface)
            peer = link_peer(self.intfs[port])
            if peer is not None and peer.node is not self:
                self._disable_peer_offloads(peer)
        if self.pcap_dir:
            Path(self.pcap_dir).mkdir(parents=True, exist_ok=True)
        self.port_count = len(ports)   # for stop(): Mininet deletes the links (and intfs) first
        self.process = SwitchProcess(ports, binary=self.binary, grpc_port=self.grpc_port or None,
                                     device_id=self.device_id, cpu_port=self.cpu_port,
                                     pcap_dir=self.pcap_dir, seed=self.seed,
                                     extra_args=self.switch_args, log_path=self.log_path,
                                     on_start=self.on_start, die_with_owner=True).start()
        self.grpc_port = self.process.grpc_port
        if self.forwarding:
            try:
                self._program_forwarding()
            except BaseException:
                self.process.stop()
                raise

    @staticmethod
    def _disable_peer_offloads(peer: Intf) -> None:
        """ethtool on the far end, run by the node that owns it (in its namespace: any host class,
        anonymous namespaces included)."""
        argv = ["ethtool", "-K", peer.name, "tx", "off", "rx", "off", "gso", "off", "tso", "off",
                "gro", "off"]
        _, err, code = peer.node.pexec(argv)
        if code != 0:
            raise LabError(f"{peer.node.name}: {' '.join(argv)} failed ({code}): {err.strip()}")

    def _program_forwarding(self) -> None:
        macs = self.host_ports()
        ports = sorted(self.data_ports())
        with Controller.connect(self.grpc_addr, device_id=self.device_id) as ctl:
            if macs:
                ctl.set_l2_forwarding(macs)
            if len(ports) == 2:
                ctl.bump_in_the_wire(*ports)

    def stop(self, deleteIntfs: bool = True) -> None:
        """Stop the switch process, then (always) let Mininet delete the interfaces.

        The switch's exit takes longer the more ports it has: 6.5 s after SIGTERM for 151 ports
        here, 19 s for 509, and with 509 more than 5 s after a SIGKILL too (Mininet has deleted
        the links by then). The grace grows with the ports, and a switch that still will not end
        is a LabError naming it, not
        subprocess's TimeoutExpired with the whole command line (10 KB for 509 ports), which
        stopped the lab's cleanup halfway and left every namespace behind."""
        try:
            if self.process is not None and self.process.proc is not None:
                proc = self.process.proc
                ports = self.port_count
                grace = 10.0 + 0.1 * ports
                try:
                    self.process.stop(grace=grace)   # and its record, if it keeps one
                except subprocess.TimeoutExpired:
                    raise LabError(f"p4netem-switch (pid {proc.pid}, {ports} ports) did not end "
                                   f"{grace:g} s after SIGTERM nor {grace:g} s after SIGKILL") from None
        finally:
            super().stop(deleteIntfs)

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines) if self.process else "(not started)"


class Bmv2Switch(Switch):
    """bmv2 `simple_switch_grpc` running p4src/p4netem.p4 compiled by `p4c-bm2-ss`.

    The functional reference target: same P4Info, same control plane. It has no delay primitive
    (the P4 program's recirculation loop stands for the timing wheel), so use it to check
    behaviour, not timing. `available()` tells whether both tools are installed.
    """

    SWITCH = "simple_switch_grpc"
    COMPILER = "p4c-bm2-ss"
    # bmv2 allocates every register cell at start: the contract's million UEs cost 3 GiB. A lab
    # has a few dozen hosts, so it compiles the program with fewer UEs (p4src/include/defines.p4;
    # the controller reads the sizes from the P4Info the switch runs).
    DEFINES = {"UE_COUNT": 4096}

    def __init__(self, name: str, grpc_port: int | None = None, pcap_dir: str | None = None,
                 log_path: str | None = None, device_id: int = 1, cpu_port: int | None = CPU_PORT,
                 build_dir: str | None = None, on_start=None, **params):
        params.setdefault("dpid", "%016x" % device_id)
        params["inNamespace"] = False   # the switch process runs in the root namespace
        super().__init__(name, **params)
        self.grpc_port = grpc_port
        self.pcap_dir = pcap_dir
        self.log_path = Path(log_path) if log_path else None
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.build_dir = Path(build_dir) if build_dir else REPO_ROOT / "build" / "bmv2"
        self.on_start = on_start  # called with the switch's pid as soon as it runs
        self.proc: subprocess.Popen | None = None
        # bmv2's Thrift runtime port: registers are reached there (p4rt/bmv2_registers.py).
        self.thrift_port: int | None = None
        self.compiled_p4info: Path | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        missing = [tool for tool in (cls.SWITCH, cls.COMPILER) if shutil.which(tool) is None]
        if missing:
            return False, (f"{' and '.join(missing)} not installed (p4c and bmv2 are not in this "
                           "machine's package registries; install them from source or the P4 "
                           "project's packages to use the bmv2 reference target)")
        return True, "ok"

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def compile(self) -> tuple[Path, Path]:
        """p4src -> (bmv2 JSON, P4Info text) under build/bmv2, recompiled when the source changed."""
        src = REPO_ROOT / "p4src" / "p4netem.p4"
        self.build_dir.mkdir(parents=True, exist_ok=True)
        tag = "-".join(f"{k}{v}" for k, v in sorted(self.DEFINES.items())) or "default"
        out_json = self.build_dir / f"p4netem-{tag}.json"
        out_info = self.build_dir / f"p4netem-{tag}.p4info.txtpb"
        newest = max(p.stat().st_mtime for p in (REPO_ROOT / "p4src").rglob("*.p4"))
        if not out_json.exists() or out_json.stat().st_mtime < newest:
            proc = subprocess.run([self.COMPILER, "--arch", "v1model", "--std", "p4-16",
                                   *[f"-D{k}={v}" for k, v in sorted(self.DEFINES.items())],
                                   "-o", str(out_json), "--p4runtime-files", str(out_info),
                                   str(src)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise LabError(f"{self.COMPILER} failed on {src}:\n{proc.stderr.strip()}")
        self.compiled_p4info = out_info
        return out_json, out_info

    def device_config(self) -> bytes:
        return self.compile()[0].read_bytes()

    def start(self, controllers) -> None:
        ok, why = self.available()
        if not ok:
            raise LabError(f"Bmv2Switch: {why}")
        self.compile()
        if not self.grpc_port:
            self.grpc_port = free_tcp_port()
        if not self.thrift_port:
            self.thrift_port = free_tcp_port()
        argv = [self.SWITCH, "--device-id", str(self.device_id), "--no-p4", "--thrift-port", str(self.thrift_port)]
        for port, intf in sorted(self.intfs.items()):
            if port > 0:
                disable_offloads(intf.name)
                argv += ["-i", f"{port}@{intf.name}"]
        if self.pcap_dir:
            Path(self.pcap_dir).mkdir(parents=True, exist_ok=True)
            argv += ["--pcap", str(self.pcap_dir)]
        argv += ["--", "--grpc-server-addr", self.grpc_addr]
        if self.cpu_port is not None:
            argv += ["--cpu-port", str(self.cpu_port)]
        log_path = self.log_path or Path(f"/tmp/p4netem-bmv2-{self.grpc_port}.log")
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        if self.on_start is not None:
            self.on_start(self.proc.pid)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LabError(f"{self.SWITCH} exited ({self.proc.returncode}); see {log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise LabError(f"{self.SWITCH} did not open {self.grpc_addr} in 30 s; see {log_path}")

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        super().stop(deleteIntfs)
