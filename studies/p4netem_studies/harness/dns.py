"""Name resolution for multi-domain pages: dnsmasq on a lab host answering the page's names.

Clients are pointed at it with /etc/netns/<ns>/resolv.conf (and an /etc/netns/<ns>/hosts holding
only localhost, so no name resolves from a file), which `ip netns exec` bind-mounts over /etc for
every process the harness starts in the client namespace: the Python loaders, node and Chromium
all resolve through it. Answers carry TTL 0 and nothing caches them on the client, so every load
looks every name up again (cold cache), as E5 asks.

DNS latency is the switch's business, not dnsmasq's: the lab classifies a client's DNS packets
into a slot running its access profile plus the DNS latency (MininetLab.set_dns_latency).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from ..web.netns import NETNS_ETC, NsProcess, hosts_text, listening

DNSMASQ = "/usr/sbin/dnsmasq"


class DnsServer:
    def __init__(self, ns: str, address: str, records: dict[str, str], workdir: Path,
                 port: int = 53):
        self.ns = ns
        self.address = address
        self.records = dict(records)
        self.workdir = Path(workdir)
        self.port = port
        self.proc: NsProcess | None = None
        self._clients: list[str] = []

    def start(self, timeout: float = 10.0) -> "DnsServer":
        if not Path(DNSMASQ).exists():
            raise RuntimeError(f"{DNSMASQ} missing: install dnsmasq-base (scripts/setup-system.sh)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        hosts = self.workdir / "hosts"
        hosts.write_text("".join(f"{ip}\t{name}\n" for name, ip in self.records.items()))
        argv = [DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
                "--no-hosts", f"--addn-hosts={hosts}", f"--listen-address={self.address}",
                "--bind-interfaces", f"--port={self.port}", "--local-ttl=0", "--no-negcache",
                "--pid-file=", "--user=root", "--log-queries",
                f"--log-facility={self.workdir / 'queries.log'}"]
        self.proc = NsProcess(self.ns, argv, self.workdir / "dnsmasq.log")
        try:
            _wait_udp(self.ns, self.port, self.proc, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def configure_client(self, ns: str) -> None:
        d = NETNS_ETC / ns
        d.mkdir(parents=True, exist_ok=True)
        (d / "resolv.conf").write_text(f"nameserver {self.address}\noptions timeout:2 attempts:2\n")
        (d / "hosts").write_text(hosts_text({}))
        self._clients.append(ns)

    def unconfigure_client(self, ns: str) -> None:
        d = NETNS_ETC / ns
        for name in ("resolv.conf", "hosts"):
            (d / name).unlink(missing_ok=True)
        try:
            d.rmdir()
        except OSError:
            pass

    def queries(self) -> list[str]:
        log = self.workdir / "queries.log"
        return [l for l in log.read_text().splitlines() if " query[" in l] if log.exists() else []

    def version(self) -> str:
        out = subprocess.run([DNSMASQ, "--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0] if out else "?"

    def stop(self) -> None:
        for ns in self._clients:
            self.unconfigure_client(ns)
        self._clients.clear()
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


def _wait_udp(ns: str, port: int, proc: NsProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not listening(ns, port, "udp"):
        if not proc.alive():
            raise RuntimeError(f"dnsmasq exited ({proc.proc.returncode}):\n{proc.log_text()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"dnsmasq not listening on udp {port} in {ns}:\n{proc.log_text()}")
        time.sleep(0.05)
