"""Test and demo labs: namespaces, veth pairs, the switch process, probe traffic."""

from .netns import PREFIX, LabError, Namespace, Resources, disable_offloads, run, stop_process, unique_token
from .owner import CleanupReport, clean_dead_labs
from .free import free_tcp_port, free_udp_port
from .switch import SwitchProcess, SwitchTls
from .twohost import LAB_PROFILE, Host, TwoHostLab

__all__ = [
    "CleanupReport",
    "LAB_PROFILE",
    "PREFIX",
    "Host",
    "LabError",
    "Namespace",
    "Resources",
    "SwitchProcess",
    "SwitchTls",
    "TwoHostLab",
    "clean_dead_labs",
    "disable_offloads",
    "free_tcp_port",
    "free_udp_port",
    "run",
    "stop_process",
    "unique_token",
]
