"""Replay a capture through a profile and report, packet by packet, what the link did to it.

`p4netem replay FILE.pcap` (docs/replay.md): tcpreplay sends the capture from a namespace on switch
port 1, tcpdump captures what h1 sent and what leaves port 2, the two are matched frame by frame
(`match.py`) and summed up (`report.py`): each packet's fate (delivered with its delay, lost,
duplicated, corrupted, reordered) and the distributions, with `--expect` thresholds for tests."""

from .match import Fate, PacketFate, match_frames
from .pcapfile import read_pcap, write_pcap
from .report import ReplayReport, check_expectations, parse_expectations

__all__ = ["Fate", "PacketFate", "match_frames", "read_pcap", "write_pcap", "ReplayReport",
           "check_expectations", "parse_expectations"]
