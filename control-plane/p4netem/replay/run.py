"""Run a replay: a TwoHostLab (h1 on switch port 1, h2 on port 2), the profile on all traffic
between the ports, tcpdump on both hosts (h1: what left it, h2: what arrived), tcpreplay from h1,
then the match. h1's capture gives each frame's real send time (tcpreplay's pacing is not exact);
only frames of the input capture count as sent, so the namespaces' own traffic is left out."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..control import Controller
from ..lab import TwoHostLab
from ..lab.netns import LabError
from ..profiles import Profile
from .match import match_frames
from .pcapfile import PcapError, read_pcap
from .report import ReplayReport

MAX_FRAME = 1514  # the lab's MTU 1500 plus the Ethernet header


@dataclass
class Pace:
    """How tcpreplay paces: as captured (default), at a rate, or as fast as it can."""

    mbps: float | None = None
    topspeed: bool = False
    multiplier: float | None = None

    def args(self) -> list[str]:
        if self.topspeed:
            return ["--topspeed"]
        if self.mbps is not None:
            return [f"--mbps={self.mbps:g}"]
        if self.multiplier is not None:
            return [f"--multiplier={self.multiplier:g}"]
        return []


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise LabError(f"{tool} not found: install Debian's {'tcpreplay' if tool == 'tcpreplay' else tool} "
                       "(scripts/setup-system.sh)")
    return path


def _start_capture(host, path: Path, direction: str) -> subprocess.Popen:
    proc = host.ns.popen([_require("tcpdump"), "-i", host.iface, "-Q", direction, "-w", str(path), "-s", "0",
                          "-n", "--immediate-mode", "--time-stamp-precision=nano", "-U"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # tcpdump says "listening on ..." once its socket is bound: only then may the replay start.
    line = proc.stderr.readline()
    if "listening on" not in line:
        proc.kill()
        raise LabError(f"tcpdump in {host.name} did not start: {line.strip()}")
    return proc


def _stop_capture(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_quiet(path: Path, quiet_s: float, max_s: float) -> None:
    """Until the capture file has not grown for quiet_s (the switch has released what it held)."""
    deadline = time.monotonic() + max_s
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now_size = path.stat().st_size if path.exists() else 0
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def replay(pcap: str | Path, profile: Profile | str, work_dir: str | Path, *, pace: Pace | None = None,
           seed: int | None = None, quiet_s: float = 1.0, max_wait_s: float = 60.0,
           binary: str | Path | None = None, bin_s: float = 0.1) -> ReplayReport:
    frames = read_pcap(pcap)
    if not frames:
        raise PcapError(f"{pcap}: no frames")
    too_long = sum(len(f) > MAX_FRAME for _, f in frames)
    if too_long:
        raise PcapError(f"{pcap}: {too_long} frame(s) longer than {MAX_FRAME} bytes (the lab's MTU is 1500; "
                        "a capture with segmentation offload on holds such super-frames)")
    tcpreplay = _require("tcpreplay")
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    tx_path, rx_path = work / "sent.pcap", work / "received.pcap"
    pace = pace or Pace()
    with TwoHostLab(seed=seed, binary=binary, log_path=work / "switch.log").start() as lab:
        with Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
            ctl.reset()  # the lab's own classifier entries go; the port map stays
            ctl.apply(profile)
        tx = _start_capture(lab.h1, tx_path, "out")
        rx = _start_capture(lab.h2, rx_path, "in")
        try:
            r = lab.h1.ns.run([tcpreplay, "-q", "-i", lab.h1.iface, *pace.args(), str(pcap)], check=False,
                              timeout=max(120.0, (frames[-1][0] - frames[0][0]) / 1e9 * 2 + 60))
            if r.returncode != 0:
                raise LabError(f"tcpreplay failed ({r.returncode}): {(r.stderr or r.stdout).strip()}")
            _wait_quiet(rx_path, quiet_s, max_wait_s)
        finally:
            _stop_capture(tx)
            _stop_capture(rx)
    wanted = {f for _, f in frames}
    sent = [(ts, f) for ts, f in read_pcap(tx_path) if f in wanted]
    received = read_pcap(rx_path)
    fates, foreign = match_frames(sent, received)
    name = profile if isinstance(profile, str) else profile.name
    return ReplayReport(fates, foreign, bin_s=bin_s,
                        meta={"pcap": str(pcap), "frames_in_file": len(frames), "profile": name,
                              "pace": pace.args() or ["as captured"], "seed": seed,
                              "tcpreplay": r.stdout.strip().splitlines()[-1:] if r.stdout else []})
