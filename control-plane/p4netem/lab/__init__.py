"""Test and demo labs: namespaces, veth pairs, the switch process, probe traffic."""

from ..lazy_exports import lazy_exports

# Imported from their submodule when first used (p4netem.lazy_exports): the two-host lab imports
# the controller, which `p4netem host-check` or a LabError does not need.
__getattr__, __dir__ = lazy_exports(__name__, {
    ".netns": ("PREFIX", "LabError", "Namespace", "Resources", "disable_offloads", "run", "stop_process",
               "unique_token"),
    ".owner": ("CleanupReport", "clean_dead_labs"),
    ".free": ("free_tcp_port", "free_udp_port"),
    ".switch": ("SwitchProcess", "SwitchTls"),
    ".twohost": ("LAB_PROFILE", "Host", "TwoHostLab"),
})

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
