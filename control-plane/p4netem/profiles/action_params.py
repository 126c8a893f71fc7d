"""Action parameters as P4Runtime carries them: a fixed set of names, each a `bit<W>`.

Shared by the two encoders of a profile (table.py for set_impairment, radio_table.py for
set_radio): checking what an encoder produced, and reading back what a switch holds (which may be
anything a client wrote, so every problem is collected and named rather than raised at the first).
"""

from __future__ import annotations

from typing import Any, Mapping

from .errors import Problem

__all__ = ["ParamWidths"]


class ParamWidths:
    """The params of one action: name -> width in bits, in contract order."""

    def __init__(self, action: str, params: tuple[tuple[int, str, int], ...]):
        self.action = action
        self.widths = {name: bits for _, name, bits in params}

    def check_encoded(self, params: Mapping[str, int]) -> None:
        """Validation keeps every field inside its width, and an encoder writes exactly the
        action's params (those of the P4Info); this guards the guard."""
        missing, unknown = set(self.widths) - set(params), set(params) - set(self.widths)
        if missing or unknown:
            raise AssertionError(f"{self.action}: encoder gave {sorted(unknown)} not in the P4Info and "
                                 f"left out {sorted(missing)}")
        for name, value in params.items():
            if not 0 <= value < 2 ** self.widths[name]:
                raise AssertionError(f"{self.action}: {name}={value} does not fit in "
                                     f"{self.widths[name]} bits")

    def decode(self, params: Mapping[str, Any], problems: list[Problem]) -> dict[str, int]:
        """Every param as an int (P4Runtime bytestrings are big-endian); unknown, missing and
        too-wide params are added to `problems` and left out of the result."""
        values: dict[str, int] = {}
        for name in params:
            if name not in self.widths:
                problems.append(Problem(name, f"not a {self.action.rsplit('.', 1)[-1]} param"))
        for name, bits in self.widths.items():
            if name not in params:
                problems.append(Problem(name, "missing"))
                continue
            raw = params[name]
            if isinstance(raw, (bytes, bytearray)):
                value = int.from_bytes(raw, "big")
            elif isinstance(raw, int) and not isinstance(raw, bool):
                value = raw
            else:
                problems.append(Problem(name, f"{raw!r} is not an integer or a P4Runtime bytestring"))
                continue
            if not 0 <= value < 2 ** bits:
                problems.append(Problem(name, f"{value} out of range 0..{2 ** bits - 1} (bit<{bits}>)"))
                continue
            values[name] = value
        return values
