"""Mininet's CLI with the lab's own commands: switch the profile, the servers' initial window,
load the served page, list the hosts."""

from __future__ import annotations

import errno
import os
from select import POLLERR, POLLHUP, POLLIN, POLLNVAL, poll

from . import stdlib_distutils

stdlib_distutils.load()
from mininet.cli import CLI  # noqa: E402 (after the above)
from mininet.log import error, output
from mininet.util import quietRun
from p4netem.stop_signals import check_pending

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
        self._stdin_done = False   # standard input at its end: polled no more (waitForNode)
        super().__init__(lab.net, **kwargs)

    def onecmd(self, line: str):
        """A line (typed or of the script), then a SIGTERM that Python dropped while it ran
        (p4netem.cli.signals) ends `lab up` before the next line or prompt."""
        stop = super().onecmd(line)
        check_pending()
        return stop

    def waitForNode(self, node) -> None:
        """Mininet's waitForNode (a host command's output printed, keys typed sent to it), with
        two changes:

        - a standard input at its end (</dev/null, a closed pipe: scripts, CI, nohup, a closed
          terminal) is polled no more. Mininet polls it with the node's output for every command,
          and poll() then returns at once, again and again: a core spun for as long as the command
          ran (`--cmd "client sleep 10" </dev/null`: 9 s of CPU, against 0.8 s with a terminal);
        - in a script (`lab up --cmd`), Ctrl-C ends the script as it would a shell script: the
          command is interrupted and KeyboardInterrupt goes on to `lab up` (exit 130, the lab
          removed, the lines after it not run). Interactively it interrupts the command only, as
          in Mininet;
        - a SIGTERM that Python dropped (p4netem.cli.signals) ends the wait within a second."""
        node_out = poll()
        node_out.register(node.stdout, POLLIN)
        both = poll()
        both.register(node.stdout, POLLIN)
        if not self._stdin_done:
            both.register(self.stdin, POLLIN)
        if self.isatty():
            quietRun("stty -icanon min 1")  # as Mininet: keys go to the command one by one
        while True:
            try:
                check_pending()   # a dropped SIGTERM (p4netem.cli.signals): looked for every second
                events = dict(both.poll(1000))
                if not self._stdin_done:
                    ev = events.get(self.stdin.fileno(), 0)
                    if ev & POLLIN:
                        # From the descriptor, not through sys.stdin's buffer: what that buffer
                        # held would wait for a poll that never comes (`echo x | ... cat`).
                        data = os.read(self.stdin.fileno(), 1024)
                        if data:
                            node.write(data.decode(errors="replace"))
                        else:
                            self._stdin_done = True
                    elif ev & (POLLHUP | POLLERR | POLLNVAL):
                        self._stdin_done = True
                    if self._stdin_done:
                        both.unregister(self.stdin)
                if any(mask & POLLIN for _, mask in node_out.poll(0)):
                    output(node.monitor())
                if not node.waiting:
                    break
            except KeyboardInterrupt:
                node.sendInt()
                if self.inputFile:
                    raise   # the lab's close ends what still runs in the host
            except OSError as exc:
                if exc.errno != errno.EINTR:
                    error(f"select.error: {exc}\n")
                    node.sendInt()

    def do_source(self, line: str) -> None:
        """source FILE: run the file's lines. A Ctrl-C that ends it (waitForNode) leaves the CLI
        out of script mode, as the end of the file does."""
        try:
            super().do_source(line)
        finally:
            if self.inputFile is not None and not isinstance(self.inputFile, str):
                self.inputFile.close()
                self.inputFile = None

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
