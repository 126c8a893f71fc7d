"""Run a replay: a TwoHostLab (h1 on switch port 1, h2 on port 2), the profile on all traffic
between the ports, tcpdump on both hosts (h1: what left it, h2: what arrived), tcpreplay from h1,
then the match. h1's capture gives each frame's real send time (tcpreplay's pacing is not exact);
only frames of the input capture count as sent, so the namespaces' own traffic is left out."""

from __future__ import annotations

import re
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
    # -B: a 32 MiB capture buffer (the default 2 MiB overflows at --topspeed and tcpdump drops).
    proc = host.ns.popen([_require("tcpdump"), "-i", host.iface, "-Q", direction, "-B", "32768", "-w", str(path),
                          "-s", "0",
                          "-n", "--immediate-mode", "--time-stamp-precision=nano", "-U"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # tcpdump says "listening on ..." once its socket is bound: only then may the replay start.
    line = proc.stderr.readline()
    if "listening on" not in line:
        proc.kill()
        raise LabError(f"tcpdump in {host.name} did not start: {line.strip()}")
    return proc


def _stop_capture(proc: subprocess.Popen) -> int:
    """Stop tcpdump; the frames it says the kernel dropped (not in its file)."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    m = re.search(r"(\d+) packets? dropped by kernel", err or "")
    return int(m.group(1)) if m else 0


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


def _wait_released(ctl: Controller, max_s: float, poll_s: float = 0.05) -> int:
    """Until the switch holds none of the replayed packets: every packet counted in has left or
    been dropped (stats' `held`, in + duplicated - out - dropped, is 0 on every row) and no new
    one came in since the last read. A profile may hold a packet far longer than any fixed quiet
    time (a 2 s delay, a radio's 1.8 s wake-up, a slow rate's backlog). Returns what is still
    held when max_s runs out (0: all released)."""
    deadline = time.monotonic() + max_s
    last_in = -1
    while True:
        rows = ctl.stats().rows
        held = sum(r.counters.conservation_gap() for r in rows)
        packets_in = sum(r.counters.profile_in for r in rows)
        if held <= 0 and packets_in == last_in:
            return 0
        if time.monotonic() >= deadline:
            return max(held, 0)
        last_in = packets_in
        time.sleep(poll_s)


def sent_and_received(frames: list[tuple[int, bytes]], tx: list[tuple[int, bytes]], rx: list[tuple[int, bytes]]
                      ) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]], int]:
    """(sent, received, unseen) for match_frames from the input capture's frames and the two
    captures: sent = the frames of the input h1's capture saw leave (with their real send time),
    received = what h2's capture saw arrive, less the frames of the input h1's capture missed
    (tcpdump drops frames when its buffer overflows): those were sent all the same but have no
    send time, so they are counted (unseen) and left out, not taken for corrupted copies or
    duplicates of similar frames."""
    wanted = {f for _, f in frames}
    sent = [(ts, f) for ts, f in tx if f in wanted]
    seen = {f for _, f in sent}
    received, unseen = [], 0
    for ts, f in rx:
        if f in wanted and f not in seen:
            unseen += 1
        else:
            received.append((ts, f))
    return sent, received, unseen


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
    with TwoHostLab(seed=seed, binary=binary, log_path=work / "switch.log").start() as lab, \
            Controller.connect(lab.switch.grpc_addr, election_id=2) as ctl:
        ctl.reset()  # the lab's own classifier entries go; the port map stays
        ctl.apply(profile)
        tx = _start_capture(lab.h1, tx_path, "out")
        rx = _start_capture(lab.h2, rx_path, "in")
        try:
            r = lab.h1.ns.run([tcpreplay, "-q", "-i", lab.h1.iface, *pace.args(), str(pcap)], check=False,
                              timeout=max(120.0, (frames[-1][0] - frames[0][0]) / 1e9 * 2 + 60))
            if r.returncode != 0:
                raise LabError(f"tcpreplay failed ({r.returncode}): {(r.stderr or r.stdout).strip()}")
            started = time.monotonic()
            still_held = _wait_released(ctl, max_wait_s)
            # Then until the receiver's capture has been quiet (tcpdump has written the last frames).
            _wait_quiet(rx_path, quiet_s, max(quiet_s, max_wait_s - (time.monotonic() - started)) + quiet_s)
        finally:
            dropped = {"sent": _stop_capture(tx), "received": _stop_capture(rx)}
    sent, received, unseen = sent_and_received(frames, read_pcap(tx_path), read_pcap(rx_path))
    fates, foreign = match_frames(sent, received)
    name = profile if isinstance(profile, str) else profile.name
    return ReplayReport(fates, foreign, bin_s=bin_s,
                        meta={"pcap": str(pcap), "frames_in_file": len(frames), "profile": name,
                              "held_at_end": still_held, "capture_dropped": dropped,
                              "arrived_not_seen_sent": unseen,
                              "pace": pace.args() or ["as captured"], "seed": seed,
                              "tcpreplay": r.stdout.strip().splitlines()[-1:] if r.stdout else []})
