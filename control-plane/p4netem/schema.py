"""The pipeline's schema as the checked-in P4Info states it: every action's params with their ids
and widths, and the drop reasons (the `@p4netem_drop_reasons` annotation of the drops counter).

The P4Info (p4src/p4netem.p4info.txtpb, what p4c emits from p4src) is the one definition: the
switch generates its constants from it at build time (dataplane/proto/gen_contract.py) and the
control plane reads it here, so neither writes a param list or a drop reason out by hand. Ids for
talking to a running switch still come from the P4Info that switch reports (p4netem.p4rt.P4Info).
"""

from __future__ import annotations

import re
from functools import cache

from .paths import REPO_ROOT

__all__ = ["CONTRACT_P4INFO", "contract", "action_params", "drop_reasons", "drop_reason_stride",
           "DROP_REASONS_ANNOTATION"]

# The contract itself (not P4NETEM_P4INFO, which may point at whatever a switch runs).
CONTRACT_P4INFO = REPO_ROOT / "p4src" / "p4netem.p4info.txtpb"
DROP_REASONS_ANNOTATION = "p4netem_drop_reasons"


@cache
def contract():
    from .p4rt.p4info_text import parse_file  # parsed once, shared with P4Info.load of the same file

    return parse_file(CONTRACT_P4INFO)


def _by_name(kind: str, name: str):
    for obj in getattr(contract(), kind):
        if obj.preamble.name == name:
            return obj
    raise LookupError(f"{CONTRACT_P4INFO.name} has no {kind[:-1]} {name}")


def action_params(action: str) -> tuple[tuple[int, str, int], ...]:
    """(param id, name, bit width) of an action, in param-id order."""
    return tuple((p.id, p.name, p.bitwidth) for p in sorted(_by_name("actions", action).params,
                                                           key=lambda p: p.id))


def drop_reasons(counter: str) -> tuple[str, ...]:
    """The reasons of the drops counter, in index order."""
    for ann in _by_name("counters", counter).preamble.annotations:
        m = re.fullmatch(rf'@{DROP_REASONS_ANNOTATION}\("([a-z_ ]+)"\)', ann)
        if m:
            return tuple(m.group(1).split())
    raise LookupError(f"{CONTRACT_P4INFO.name}: {counter} has no @{DROP_REASONS_ANNOTATION} annotation")


def drop_reason_stride(drops: str, per_pd: str) -> int:
    """Cells of the drops counter per pd: its size over that of a per-pd counter."""
    return _by_name("counters", drops).size // _by_name("counters", per_pd).size
