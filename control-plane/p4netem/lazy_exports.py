"""Re-exports of a package that import their submodule only when first used (PEP 562).

Why: the packages re-export their submodules' names (`from p4netem.control import Controller`),
and eager re-exports made importing any one submodule import them all: `p4netem.profiles.errors`
pulled in every pydantic model, `p4netem.p4rt` grpc. Every `p4netem` command, `--help` included,
paid for all of it at start-up (about a second). Names read this way are the same objects, and
stay in the package's namespace once read.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of `package`, which re-exports `exports`:
    {relative submodule: names}. Use: `__getattr__, __dir__ = lazy_exports(__name__, {...})`."""
    home = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # the next read is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *home})

    return __getattr__, __dir__
