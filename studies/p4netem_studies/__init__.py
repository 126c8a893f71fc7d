"""p4netem studies: Mininet labs around the switch, web endpoints and loaders, the page-load
harness and the classic experiments (E1-E5), built on the control plane (`p4netem`).

This package depends on `p4netem` (profiles, controller, P4Runtime client, namespaces and the
switch process); the control plane never imports it. Its commands (`p4netem lab`, `p4netem
measure`, `p4netem experiment`) join the one `p4netem` command through the entry-point group
`p4netem.commands` (p4netem_studies.cli.register).

    mininet/       labs: topologies as data, the P4 switch nodes, a lab programmed over P4Runtime
    web/           pages, servers (nginx, node-spdy), loaders (HTTP/1.x, HTTP/2, SPDY, Chromium),
                   captures, TCP tuning
    harness/       plans of conditions, the load loop, metrics from captures, results
    experiments/   the studies as data (experiments/*.yaml), their plans, runs and analyses
    cli/           the commands above
"""

import p4netem as _p4netem  # noqa: F401  (loads the P4Runtime protos first: see p4netem/__init__)

__version__ = "0.1.0"
