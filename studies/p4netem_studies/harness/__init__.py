"""The page-load harness: a plan of conditions (profile, protocol, initial window, page, ...) run
in a Mininet lab with real servers and loaders, measured from the loaders and from a client-side
capture, summarised with medians and quartiles, written as CSV/JSON and plotted.

    plan.py       conditions and plans (presets: make-run)
    protocols.py  which loader, server, port and ALPN each protocol uses
    endpoints.py  generated pages, nginx and node-spdy on every server, optional dnsmasq (dns.py)
    tcp.py        congestion control, initial windows and the sysctls every run records
    radio.py      the radio idled (or pre-woken) before each load, and what it did during it
    metrics.py    what the client's capture says about a load
    runner.py     the loop: lab up, servers up, loads, teardown
    results.py    summary, files, table;  plot.py  the PNG;  measure.py  all of it with progress
"""
