"""Mininet labs: topologies as data (`topologies/*.yaml`), P4 switch nodes, and a lab that
programs the switch over P4Runtime. `topology` imports without Mininet; `lab` and `nodes` need
Mininet (Debian's python3-mininet)."""

from .topology import LabHostSpec, Topology, TopologyError, TopologySpec, load_topology, topology_names

__all__ = ["LabHostSpec", "Topology", "TopologyError", "TopologySpec",
           "load_topology", "topology_names"]
