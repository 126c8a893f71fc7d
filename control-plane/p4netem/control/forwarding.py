"""Forwarding: the port map (ingress port -> egress port) and the L2 entries (destination MAC ->
egress port, which take precedence). Each change is one atomic write of the entries that change."""

from __future__ import annotations

from collections.abc import Mapping

from .. import pipeline as pl
from ..p4rt import P4RuntimeError, update
from ..p4rt.encoding import to_int
from ..p4rt.entries import build_table_entry
from ..profiles.errors import Problem
from .rules import RuleError
from .session import Session
from .state import read_state

__all__ = ["Forwarding"]


class Forwarding:
    def __init__(self, session: Session):
        self.session = session

    def set_port_map(self, mapping: Mapping[int, int]) -> None:
        """Forward packets entering port k out of port mapping[k] (other ports are left as they are)."""
        for src, dst in mapping.items():
            for port in (src, dst):
                if not 0 <= int(port) <= 511:
                    raise RuleError([Problem("port_map", f"port {port} out of range 0..511")])
        self.session.ensure_connected()
        self._set(pl.PORT_MAP, "standard_metadata.ingress_port", read_state(self.session.client).port_map,
                  mapping, "set the port map")

    def set_l2_forwarding(self, mapping: Mapping[str | int, int]) -> None:
        """Forward packets to destination MAC m out of port mapping[m] (l2_fwd, which takes
        precedence over the port map; other MACs are left as they are). How a lab with more than
        two hosts forwards: one entry per host."""
        problems = []
        macs: dict[int, int] = {}
        for mac, port in mapping.items():
            try:
                value = to_int(mac, 48, f"MAC {mac}")
            except P4RuntimeError as err:
                problems.append(Problem("l2", err.message))
                continue
            if not 0 <= int(port) <= 511:
                problems.append(Problem("l2", f"port {port} for {mac} out of range 0..511"))
            macs[value] = int(port)
        if problems:
            raise RuleError(problems)
        self.session.ensure_connected()
        self._set(pl.L2_FWD, "hdr.ethernet.dst_addr", read_state(self.session.client).l2, macs,
                  "set the L2 forwarding entries")

    def _set(self, table: str, key: str, current: Mapping[int, int | str],
             mapping: Mapping[int, int], what: str) -> None:
        """INSERT or MODIFY the entries of a forwarding table whose out port changes, in one write."""
        updates = []
        for src, dst in sorted(mapping.items()):
            if current.get(src) == dst:
                continue
            entry = build_table_entry(self.session.info, table, {key: src}, pl.SET_EGRESS_PORT, {"port": dst})
            updates.append(update("MODIFY" if src in current else "INSERT", entry))
        self.session.write(updates, what, atomic=True)

    def bump_in_the_wire(self, port_a: int = 1, port_b: int = 2) -> None:
        """Forward port_a <-> port_b (the inline-shaper setup)."""
        self.set_port_map({port_a: port_b, port_b: port_a})

    def port_map(self) -> dict[int, int | str]:
        self.session.ensure_connected()
        return self.session.read(lambda: read_state(self.session.client).port_map)
