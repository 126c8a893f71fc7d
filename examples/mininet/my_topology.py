"""Your own Mininet topology through p4netem: two hosts on a P4NetemSwitch, a 40 ms / 10 Mbit/s
profile applied through the controller API, then ping and iperf between the hosts.

    sudo .venv/bin/python examples/mininet/my_topology.py
"""

import argparse
import re

from mininet.net import Mininet
from mininet.topo import Topo
from mininet.util import waitListening

from p4netem.control import Controller, Profile
from p4netem_studies.mininet import P4NetemSwitch


class MyTopo(Topo):
    def build(self, prefix=""):
        s1 = self.addSwitch(f"{prefix}s1")
        for name in ("h1", "h2"):      # h1 on switch port 1, h2 on port 2
            self.addLink(self.addHost(f"{prefix}{name}"), s1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default="", help="before every node name (to run beside other networks)")
    args = ap.parse_args()
    # Mininet() would first set machine-wide limits and sysctls (its fixLimits: tcp_rmem and
    # tcp_wmem, which every namespace made later copies); skip that on a machine others use.
    Mininet.inited = True
    net = Mininet(topo=MyTopo(prefix=args.prefix), switch=P4NetemSwitch, controller=None)
    try:
        net.start()
        h1, h2 = net.hosts
        switch = net.switches[0]
        print(f"switch {switch.name}: P4Runtime at {switch.grpc_addr}")
        # Default rule: all traffic between switch port 1 and port 2; 20 ms each way = 40 ms RTT.
        profile = Profile.parse({"name": "my-link", "both": {"delay": "20ms", "rate": "10Mbit"}})
        with Controller.connect(switch.grpc_addr) as ctl:
            ctl.apply(profile)
        out = h1.cmd(f"ping -c 5 -i 0.2 {h2.IP()}")
        rtt_min, rtt_avg = re.search(r"= ([\d.]+)/([\d.]+)/", out).groups()  # the first waits for ARP
        print(f"ping h1 -> h2: rtt min {rtt_min} ms, avg {rtt_avg} ms")
        # iperf by hand: Mininet 2.3.0's net.iperf() waits forever with iperf >= 2.0.14
        # (mininet/mininet#1060).
        h2.cmd("iperf -s -p 5001 &")
        waitListening(h1, h2, 5001)
        report = h1.cmd(f"iperf -c {h2.IP()} -p 5001 -t 3 -y C").strip().splitlines()[-1]
        h2.cmd("kill %iperf")
        print(f"iperf h1 -> h2: {int(report.split(',')[-1]) / 1e6:.2f} Mbit/s")
    finally:
        net.stop()


if __name__ == "__main__":
    main()
