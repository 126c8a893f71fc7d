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
        problems: list[Problem] = []
        ports = {_port(src, "port_map", problems): _port(dst, f"port_map[{src!r}]", problems)
                 for src, dst in mapping.items()}
        if problems:
            raise RuleError(problems)
        self._set(pl.PORT_MAP, "standard_metadata.ingress_port", lambda state: state.port_map,
                  ports, "set the port map")

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
            macs[value] = _port(port, f"l2[{mac!r}]", problems)
        if problems:
            raise RuleError(problems)
        self._set(pl.L2_FWD, "hdr.ethernet.dst_addr", lambda state: state.l2, macs,
                  "set the L2 forwarding entries")

    def _set(self, table: str, key: str, current, mapping: Mapping[int, int], what: str) -> None:
        """INSERT or MODIFY the entries of a forwarding table whose out port changes, in one write.
        `current(state)`: the table's entries in a fresh snapshot, read under the session's lock."""
        with self.session.lock:
            self.session.ensure_connected()
            current = current(self.session.read(lambda: read_state(self.session.client)))
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


def _port(value: object, where: str, problems: list[Problem]) -> int:
    """A switch port (bit<9>: 0..511) given as an int or its digits; otherwise a problem naming
    `where` and the allowed range (recorded, -1 returned)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 511:
        return value
    problems.append(Problem(where, f"{value!r} is not a switch port; allowed 0..511"))
    return -1
