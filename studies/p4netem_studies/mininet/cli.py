"""Mininet's CLI with the lab's own commands: switch the profile, the servers' initial window,
load the served page, list the hosts."""

from __future__ import annotations

from mininet.cli import CLI
from mininet.log import output

from ..harness.protocols import PROTOCOLS, protocol


class LabCLI(CLI):
    """With `script` (the --cmd lines of `lab up`), Mininet's CLI runs the lines and returns from
    the constructor; `failures` then names each line that failed, so that `lab up` can exit 1 as a
    shell script would. Mininet itself reports no status: a host command's output is printed and
    its exit status dropped."""

    prompt = "p4netem> "

    def __init__(self, lab, served=None, **kwargs):
        self.lab = lab
        self.served = served   # (Endpoints, page name) or None
        self.failures: list[str] = []
        super().__init__(lab.net, **kwargs)

    def default(self, line: str) -> None:
        """`HOST COMMAND` as Mininet runs it, then (scripted only) the command's exit status, read
        from the host's shell right after it: `$?` of the shell Mininet keeps per node."""
        super().default(line)
        if not self.inputFile:
            return
        first, args, _ = self.parseline(line)
        if first in self.mn and args:
            status = self.mn[first].cmd("echo $?").strip()
            if status != "0":
                self.failures.append(f"{line.strip()!r} exited with status {status}")

    def _failed(self, line: str, why: str) -> None:
        output(f"{why}\n")
        self.failures.append(f"{line.strip()!r}: {why}")

    def do_profile(self, line: str) -> None:
        """profile NAME[+radio]: put the clients' links on a profile (built-in or YAML file)."""
        from ..harness.plan import resolve_profile
        name = line.strip()
        if not name:
            self._failed(f"profile {line}", "usage: profile NAME[+radio]")
            return
        radio = name.endswith("+radio")
        try:
            prof = resolve_profile(name[: -len("+radio")] if radio else name)
            rec = self.lab.apply_profile(prof, radio=radio)[0]
        except Exception as exc:  # noqa: BLE001 - report and stay in the CLI
            self._failed(f"profile {line}", f"profile: {exc}")
            return
        note = f" ({rec.radio.note})" if rec.radio.requested and not rec.radio.applied else ""
        output(f"profile {prof.name}: {prof.description}{note}\n")

    def do_iw(self, line: str) -> None:
        """iw N: set the servers' initial congestion window to N segments."""
        from ..harness.tcp import set_initial_windows
        if not line.strip().isdigit():
            self._failed(f"iw {line}", f"usage: iw N (segments, 1..1024), not {line.strip()!r}")
            return
        try:
            n = int(line.strip())
            set_initial_windows(self.lab, n)
        except (ValueError, RuntimeError) as exc:
            self._failed(f"iw {line}", f"iw: {exc}")
            return
        output(f"servers' initcwnd = {n}\n")

    def do_load(self, line: str) -> None:
        """load PROTOCOL [plain]: load the served page from the first client once."""
        from ..harness.metrics import wire_metrics
        from ..web.capture import Capture, read_pcap
        from ..web.load import run_loader
        args = line.split()
        if not self.served or not args:
            self._failed(f"load {line}", "usage: load PROTOCOL [plain] (needs `lab up --serve PAGE`); "
                         f"protocols: {', '.join(PROTOCOLS)}")
            return
        ep, page = self.served
        if len(args) > 2 or args[1:] not in ([], ["plain"]):
            self._failed(f"load {line}", f"usage: load PROTOCOL [plain], not {line.strip()!r}")
            return
        try:
            proto = protocol(args[0])
            tls = "plain" not in args[1:]
            port = proto.port(tls)
        except ValueError as exc:
            self._failed(f"load {line}", f"load: {exc}")
            return
        client = self.lab.topology.clients[0].name
        ns = self.lab.ns(client)
        pcap = ep.workdir / "cli-load.pcap"
        cap = Capture(ns, "eth0", pcap, "tcp")
        extra = [f"--browser-arg={a}" for a in proto.browser_args]
        try:
            report = run_loader(ns, proto.loader, ep.content.paths[page],
                                resolve=ep.resolve_map(page), scheme="https" if tls else "http",
                                port=port, ca_file=str(ep.content.cert.ca_cert),
                                spki=[ep.content.cert.spki_sha256], timeout_s=120,
                                extra_args=extra)
        except RuntimeError as exc:
            self._failed(f"load {line}", f"load: {exc}")
            return
        finally:
            cap.stop()
        wire = wire_metrics(read_pcap(pcap), self.lab.ip(client))
        plt = "-" if wire.plt_ms is None else f"{wire.plt_ms / 1000:.3f} s"
        syn = ("-" if wire.first_syn_to_synack_ms is None
               else f"{wire.first_syn_to_synack_ms:.1f} ms")
        output(f"{proto.name} {'tls' if tls else 'plain'}: ok={report.get('ok')} "
               f"page-load {plt} (loader {report.get('elapsed_ms')} ms), "
               f"{wire.connections_opened} connections, {wire.packets_down} packets down / "
               f"{wire.packets_up} up, first SYN->SYN-ACK {syn}\n")
        for e in report.get("errors", [])[:5]:
            output(f"  error: {e}\n")
        if not report.get("ok"):
            self.failures.append(f"{('load ' + line).strip()!r}: the page did not load")

    def do_hosts(self, _line: str) -> None:
        """hosts: name, address, namespace, slot and UE id of every host."""
        for h in self.lab.topology.hosts:
            output(f"{h.name:10} {h.ip:15} {self.lab.ns(h.name):24} slot={h.slot} ue={h.ue}\n")
