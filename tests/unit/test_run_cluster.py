"""What a Ray lab reads from its node's settings (runs/cluster.py), without a cluster."""

from __future__ import annotations

import pytest

from p4netem_studies.runs.cluster import SUBREAPER_OPTION, raylet_kills_orphans


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("True", True), (" 1", False),
                                       ("0", False), ("false", False), ("", False), (None, False)])
def test_the_raylet_subreaper_option_is_read_as_ray_reads_a_boolean(value, on):
    environ = {} if value is None else {SUBREAPER_OPTION: value}
    assert raylet_kills_orphans(environ) is on
