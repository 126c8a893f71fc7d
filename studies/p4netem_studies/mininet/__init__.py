"""Mininet labs: topologies as data (`topologies/*.yaml`), P4 switch nodes, and a lab that
programs the switch over P4Runtime. `topology` imports without Mininet; `lab` and `nodes` need
Mininet (Debian's python3-mininet).

In your own Mininet script: `from p4netem_studies.mininet import P4NetemSwitch` (imported from
`nodes` on first use, so importing this package still needs no Mininet)."""

from .topology import LabHostSpec, Topology, TopologyError, TopologySpec, load_topology, topology_names

_NODES = ("P4NetemSwitch", "Bmv2Switch", "LabHost")

__all__ = ["LabHostSpec", "Topology", "TopologyError", "TopologySpec",
           "load_topology", "topology_names"]  # not the nodes: `import *` needs no Mininet


def __getattr__(name: str):
    if name in _NODES:
        from . import nodes
        return getattr(nodes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
