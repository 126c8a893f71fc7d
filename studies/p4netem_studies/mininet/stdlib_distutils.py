"""The standard library's distutils for Mininet, not setuptools'.

mininet.node imports `distutils.version` (for StrictVersion, to compare Open vSwitch versions).
In a venv with setuptools, its distutils-precedence.pth puts a finder first on sys.meta_path that
answers `import distutils` with setuptools' own copy, which imports all of setuptools first: 0.3 s
of every process that imports Mininet (each `lab up`, each lab process of `experiment run`), a
second on a busy machine. The standard library's copy (still in Python 3.11) has the same
StrictVersion and imports in milliseconds. Call `load()` before the first Mininet import.
"""

from __future__ import annotations

import sys
import warnings


def load() -> None:
    """Import the standard library's distutils.version unless some distutils is already imported
    (then Mininet gets that one, as before)."""
    if "distutils" in sys.modules:
        return
    shims = [f for f in sys.meta_path if type(f).__name__ == "DistutilsMetaFinder"]
    if not shims:
        return
    for f in shims:
        sys.meta_path.remove(f)
    try:
        with warnings.catch_warnings():
            # "The distutils package is deprecated": Mininet's import, not ours to act on.
            warnings.simplefilter("ignore", DeprecationWarning)
            import distutils.version  # noqa: F401
    except ImportError:
        pass            # a Python without it: setuptools' copy, through the finder, as before
    finally:
        sys.meta_path[0:0] = shims
