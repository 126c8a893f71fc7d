"""`p4netem port-map`: which port a packet leaves by, per port it came in on (the switch's
port_map table), set on a running switch: what `p4netem switch --port-map` installs at start,
and what `reset --port-map` deletes."""

from __future__ import annotations

import re
from typing import Annotated

import typer

from .common import DEFAULT_ADDR, DeviceId, ElectionId, SwitchAddr, connect, console, guarded


def parse_port_pairs(text: str, param_hint: str, alternatives: str = "") -> dict[int, int]:
    """IN:OUT pairs, comma-separated ("1:2,2:1"), each IN once. The ports' range (0..511) is the
    controller's check when they are written (exit 1, naming the port)."""
    mapping: dict[int, int] = {}
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", item)
        if not m:
            raise typer.BadParameter(f"{item!r} is not IN:OUT (e.g. 1:2,2:1){alternatives}", param_hint=param_hint)
        src, dst = int(m.group(1)), int(m.group(2))
        if src in mapping:
            raise typer.BadParameter(f"port {src} is given twice", param_hint=param_hint)
        mapping[src] = dst
    return mapping


@guarded
def port_map(
    pairs: Annotated[str, typer.Argument(metavar="IN:OUT,...", help="e.g. 1:2,2:1 (the bump in the wire).")],
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Forward packets entering port IN out of port OUT, on a running switch.

    One atomic write; ports not named keep their entries (`p4netem show` lists them; `reset
    --port-map` deletes them all). L2 entries by destination MAC, which labs with more than two
    hosts use, still come first."""
    mapping = parse_port_pairs(pairs, "'IN:OUT,...'")
    with connect(addr, device_id, election_id) as ctl:
        ctl.set_port_map(mapping)
        now = ctl.port_map()
    shown = ", ".join(f"{k} -> {v}" for k, v in sorted(now.items()))
    console.print(f"port map {shown}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("port-map")(port_map)
