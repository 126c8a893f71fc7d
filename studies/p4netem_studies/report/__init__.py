"""Reports of experiment runs: one self-contained HTML page per run (`p4netem experiment report
DIR`): the study's tables and plots, bootstrap confidence intervals on its medians and
gains, the environment the run had, and the original study's conclusions checked on the rows.

    reader.py     a run directory -> RunData (the one place that knows the file layout)
    bootstrap.py  seeded percentile-bootstrap intervals (medians, ratios, differences)
    estimates.py  samples of a run's rows and the intervals over them
    claims.py     each study's conclusions as checks with verdicts
    html.py       the page
"""

from __future__ import annotations

from .reader import RunData, read_run_directory

__all__ = ["RunData", "read_run_directory"]
