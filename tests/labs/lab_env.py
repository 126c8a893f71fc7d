"""Pages, helpers and the shared lab object of the Mininet lab tests (imported by conftest.py
and the tests; a module of its own so it never collides with tests/conftest.py)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from p4netem.lab.owner import links, netns_names, start_ticks
from p4netem_studies.harness.endpoints import Endpoints, SiteContent
from p4netem_studies.harness.metrics import WireMetrics, wire_metrics
from p4netem_studies.harness.protocols import protocol
from p4netem_studies.harness.tcp import set_initial_windows
from p4netem.profiles import Profile, builtin_profile
from p4netem_studies.web.capture import Capture, read_pcap
from p4netem_studies.web.load import run_loader

# Pages of the session: the make-run page, 8 small objects on one host (round trips dominate),
# E3 page C (300 KB images) for first flights, and E5's first site (two host names, 12 KB).
DEMO, SMALL, BIG, TWO_ORIGINS = "demo", "uniform-8x1000", "e3-c-1s", "e5-site1"


def delay_profile(rtt_ms: float, name: str = "rtt") -> Profile:
    """Only delay: RTT split equally over the two directions, no rate limit, no loss."""
    return Profile.parse({"name": name, "both": {"delay": f"{rtt_ms / 2}ms"}})


@dataclass
class Load:
    report: dict
    wire: WireMetrics
    pcap: Path


class WebLab:
    def __init__(self, lab, endpoints: Endpoints, content: SiteContent, tmp: Path):
        self.lab = lab
        self.endpoints = endpoints
        self.content = content
        self.tmp = tmp
        self._n = 0
        self.iw = None

    @property
    def client_ns(self) -> str:
        return self.lab.ns("client")

    def set(self, profile: Profile | str, *, iw: int = 10, radio: bool = False):
        prof = builtin_profile(profile) if isinstance(profile, str) else profile
        rec = self.lab.apply_profile(prof, radio=radio)[0]
        if iw != self.iw:
            set_initial_windows(self.lab, iw)
            self.iw = iw
        return rec

    def load(self, proto: str, page: str = DEMO, *, tls: bool = True, timeout_s: float = 60,
             conns_per_host: int | None = None, port: int | None = None,
             extra_args: tuple[str, ...] = ()) -> Load:
        """One load with a capture; `port`: a server of the test's own instead of the lab's;
        `extra_args`: more options of p4netem_studies.web.load (--revalidate)."""
        p = protocol(proto)
        self._n += 1
        pcap = self.tmp / f"load{self._n}.pcap"
        extra = []
        if p.loader.startswith("h1"):
            extra += ["--conns-per-host", str(conns_per_host or p.conns_per_host)]
        extra += [f"--browser-arg={a}" for a in p.browser_args]
        extra += list(extra_args)
        cap = Capture(self.client_ns, "eth0", pcap, "tcp")
        try:
            report = run_loader(self.client_ns, p.loader, self.content.paths[page],
                                resolve=self.endpoints.resolve_map(page),
                                scheme="https" if tls else "http", port=port or p.port(tls),
                                ca_file=str(self.content.cert.ca_cert),
                                spki=[self.content.cert.spki_sha256], timeout_s=timeout_s,
                                extra_args=extra)
        finally:
            cap.stop()
        return Load(report, wire_metrics(read_pcap(pcap), self.lab.ip("client"),
                                         initcwnd=self.iw or 10), pcap)


def e2_short_warmup(tmp_path: Path) -> Path:
    """A copy of E2's definition (tmp_path/e2-initial-window.yaml) whose quick variant warms up
    for 2 s instead of 10: for the tests that run E2's quick variant for what it produces (rows,
    files, labs, figures within bounds a cold start keeps), not for a steady state. 2 s still
    has pages started in the warm-up and left out of the window. Saves 8 s per run."""
    src = Path(__file__).resolve().parents[2] / "experiments" / "e2-initial-window.yaml"
    text = src.read_text()
    assert text.count("\n  warmup_s: 10\n") == 1, f"{src}: its quick block no longer has warmup_s: 10"
    dst = tmp_path / "e2-initial-window.yaml"
    dst.write_text(text.replace("\n  warmup_s: 10\n", "\n  warmup_s: 2\n"))
    return dst


# What a lab leaves behind, by its prefix (the lab cleanup tests and the killed-run test), seen
# as the crash cleanup sees it (p4netem.lab.owner).

def alive(pid: int) -> bool:
    """A running process (not a zombie) has this pid."""
    return start_ticks(pid) is not None


def assert_gone(prefix: str, pids: list[int], timeout: float = 10) -> None:
    """No namespace or link named with `prefix` and none of `pids` alive, within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (not any(n.startswith(prefix) for n in netns_names())
                and not any(l.startswith(prefix) for l in links())
                and not any(alive(p) for p in pids)):
            return
        time.sleep(0.1)
    raise AssertionError(f"left behind: namespaces "
                         f"{[n for n in netns_names() if n.startswith(prefix)]}, links "
                         f"{[l for l in links() if l.startswith(prefix)]}, processes "
                         f"{[p for p in pids if alive(p)]}")


class ChildOutput:
    """A child's stdout, collected by a thread, so that a test can wait for a line without blocking."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.text = ""
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.text += line

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """The first match of `pattern` in the output so far (its .string: the output then); fails
        with the whole output when the child ends or `timeout` passes without one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if m := re.search(pattern, self.text):
                return m
            if self.proc.poll() is not None and not self._t.is_alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in output (exit {self.proc.poll()}):\n{self.text}")
