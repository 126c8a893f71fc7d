"""The kernel fast path (issue 14, io/flow_cache.rs): an XDP flow cache on every port forwards the
packets of flows the pipeline already decided to forward unimpaired. On real veths and namespaces:
it is on by default and reported (log, metric); traffic crosses it with counters that still
conserve and show the hits; a profile write (loss, then delay) and table writes (classifier
modify, port_map modify and delete) take effect on the very next packet of a flow that was being
fast-pathed; --pcap and --fast-path off keep it off; a bad --fast-path value is a one-line error."""

from __future__ import annotations

import queue
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from wirestats import MS, iperf3_tcp, ping, prob, settled_counters

from p4netem import pipeline as pl
from p4netem.lab import TwoHostLab
from p4netem.lab.free import free_tcp_port
from p4netem.lab.probe import run_probe
from p4netem.pipeline import UPLINK, DropReason

# One UDP flow with a fixed source port, so that every datagram has the same cache key.
SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.0.0.1", 40000))
for line in sys.stdin:
    tag, n = line.split()
    for i in range(int(n)):
        s.sendto(f"{tag} {i} {time.monotonic_ns()}".encode(), ("10.0.0.2", 9100))
        time.sleep(0.001)
    print("sent", flush=True)
"""
RECEIVER = r"""
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 9100))
print("ready", flush=True)
while True:
    data = s.recv(2048)
    print(data.decode(), time.monotonic_ns(), flush=True)
"""


def metrics(url: str) -> dict[str, object]:
    """The fast path's state label and counters from the switch's /metrics."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict[str, object] = {}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            if s.name == "p4netem_switch_fast_path" and s.value == 1:
                out["state"] = s.labels["state"]
            elif s.name.startswith("p4netem_switch_fast_path_"):
                out[s.name.removeprefix("p4netem_switch_fast_path_").removesuffix("_total")] = int(s.value)
    return out


def metrics_lab(start_lab, *args: str) -> tuple[TwoHostLab, str]:
    """A lab whose switch serves --metrics-addr; (lab, metrics URL)."""
    port = free_tcp_port("127.0.0.1")
    return start_lab("--metrics-addr", f"127.0.0.1:{port}", *args), f"http://127.0.0.1:{port}/metrics"


@pytest.fixture
def fast_lab(start_lab) -> tuple[TwoHostLab, str]:
    return metrics_lab(start_lab)


def test_on_by_default_forwards_in_the_kernel_with_counters_that_conserve(fast_lab) -> None:
    lab, url = fast_lab
    m = metrics(url)
    assert m["state"] == "on", m
    assert "fast path: on" in lab.switch.log_tail(100)
    assert ping(lab.h1, lab.h2) == (5, 5)
    before = metrics(url)["packets"]
    n = 2000
    result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=n, rate=2000, size=200, port=9050)
    assert result.received == n and result.lost == 0
    m = metrics(url)
    c = settled_counters(lab, UPLINK)
    # The first packets of the flow take the data-plane thread (which installs the entry); the rest
    # are hits. profile_in and profile_out count both.
    assert m["packets"] - before >= 0.9 * n, (m, n)
    assert m["installs"] >= 1, m
    assert c.profile_out == c.profile_in and c.conservation_gap() == 0, c
    assert c.profile_in == n + 5 + 0, c  # the probe's datagrams and the 5 echo requests

    down0 = settled_counters(lab, pl.DOWNLINK)
    received = iperf3_tcp(lab.h1, lab.h2)
    assert received["bytes"] > 1_000_000
    up, down = settled_counters(lab, UPLINK), settled_counters(lab, pl.DOWNLINK)
    assert up.conservation_gap() == 0 and down.conservation_gap() == 0, (up, down)
    crossed = up.profile_in - c.profile_in + down.profile_in - down0.profile_in
    hits = metrics(url)["packets"] - m["packets"]
    assert hits >= 0.9 * crossed, f"{hits} of {crossed} TCP packets took the fast path"


class Flow:
    """One UDP flow h1:40000 -> h2:9100, sent in numbered bursts; arrivals collected by a thread."""

    def __init__(self, lab: TwoHostLab):
        self.rx = lab.h2.ns.popen([sys.executable, "-u", "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
        assert self.rx.stdout is not None and self.rx.stdout.readline().strip() == "ready"
        self.tx = lab.h1.ns.popen([sys.executable, "-u", "-c", SENDER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.arrivals: queue.Queue[tuple[str, int, int, int]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.seen: list[tuple[str, int, int, int]] = []

    def _read(self) -> None:
        assert self.rx.stdout is not None
        for line in self.rx.stdout:
            tag, seq, tx, rx = line.split()
            self.arrivals.put((tag, int(seq), int(tx), int(rx)))

    def send(self, tag: str, n: int) -> None:
        """Sends n datagrams tagged `tag` (1 ms apart) and returns once they are sent."""
        assert self.tx.stdin is not None and self.tx.stdout is not None
        self.tx.stdin.write(f"{tag} {n}\n")
        self.tx.stdin.flush()
        assert self.tx.stdout.readline().strip() == "sent"

    def got(self, tag: str, settle: float = 1.0, expect: int | None = None) -> list[tuple[int, int, int]]:
        """(seq, tx_ns, rx_ns) of the datagrams tagged `tag` that arrived, `settle` s after the last;
        with `expect`, as soon as that many of them are in (a burst that must arrive whole need not
        wait for silence: what else of it arrives later, a duplicate, is in `seen` for settle())."""
        deadline = time.monotonic() + settle
        while expect is None or sum(1 for g, *_ in self.seen if g == tag) < expect:
            try:
                self.seen.append(self.arrivals.get(timeout=max(0.0, deadline - time.monotonic())))
                deadline = time.monotonic() + settle
            except queue.Empty:
                break
        return [(s, t, r) for g, s, t, r in self.seen if g == tag]

    def settle(self, settle: float = 1.0) -> dict[str, list[int]]:
        """Once nothing has arrived for `settle` s: the sequence numbers of every tag seen, late
        arrivals included."""
        self.got("", settle)
        seqs: dict[str, list[int]] = {}
        for g, s, _, _ in self.seen:
            seqs.setdefault(g, []).append(s)
        return seqs

    def close(self) -> None:
        for p in (self.tx, self.rx):
            p.kill()
            p.wait()


def test_writes_take_effect_on_the_very_next_packet(fast_lab) -> None:
    """A flow is fast-pathed; then each write is followed at once by a burst of the same flow:
    no packet of the burst may be forwarded under the decision before the write."""
    lab, url = fast_lab
    client = lab.client
    flow = Flow(lab)
    try:
        bursts: dict[str, int] = {}

        def fast_burst(tag: str, n: int = 200) -> None:
            before = metrics(url)["packets"]
            flow.send(tag, n)
            # Back as soon as all n are in (the wait for silence after them, a second per burst,
            # is the final check's, once for every burst: nothing more of any may arrive).
            assert [s for s, _, _ in flow.got(tag, expect=n)] == list(range(n)), f"burst {tag}: not all {n} in order"
            assert metrics(url)["packets"] - before >= n - 5, f"burst {tag} was not fast-pathed"
            bursts[tag] = n

        fast_burst("a")
        # Profile write: 100 % loss. Every datagram of the next burst is dropped, as loss_random.
        lab.impair(UPLINK, loss_prob=prob(1.0))
        c0 = settled_counters(lab, UPLINK)
        flow.send("b", 100)
        assert flow.got("b") == [], "forwarded after a loss profile was written"
        c1 = settled_counters(lab, UPLINK)
        assert c1.drops[DropReason.LOSS_RANDOM] - c0.drops[DropReason.LOSS_RANDOM] == 100, (c0, c1)
        # Profile modify: 30 ms delay. Every datagram of the next burst is delayed.
        lab.impair(UPLINK, delay_ns=30 * MS)
        flow.send("c", 50)
        got = flow.got("c", expect=50)
        assert len(got) == 50
        bursts["c"] = 50
        assert min(r - t for _, t, r in got) >= 30 * MS, "a datagram crossed without the new delay"
        # Profile delete: no impairment, fast again.
        client.delete(client.table_entry(pl.PROFILE, {"meta.profile_id": 1, "meta.direction": UPLINK},
                                         pl.SET_IMPAIRMENT, pl.impairment_params()))
        fast_burst("d")

        # Classifier modify: the flow moves to profile 2, whose uplink drops everything.
        lossy = client.table_entry(pl.PROFILE, {"meta.profile_id": 2, "meta.direction": UPLINK}, pl.SET_IMPAIRMENT,
                                   pl.impairment_params(loss_prob=prob(1.0)))
        client.insert(lossy)
        fast_burst("e")  # profile 2 is written but not used yet: still fast
        moved = client.table_entry(pl.CLASSIFIER, {"standard_metadata.ingress_port": 1}, pl.SET_PROFILE,
                                   {"profile_id": 2, "direction": UPLINK, "ue_id": 0}, priority=10)
        client.modify(moved)
        flow.send("f", 100)
        assert flow.got("f") == [], "forwarded under the classifier entry before its modify"
        p2 = settled_counters_pd(lab, 2 * 2 + UPLINK)
        assert p2.profile_in == 100 and p2.drops[DropReason.LOSS_RANDOM] == 100, p2
        client.modify(client.table_entry(pl.CLASSIFIER, {"standard_metadata.ingress_port": 1}, pl.SET_PROFILE,
                                         {"profile_id": 1, "direction": UPLINK, "ue_id": 0}, priority=10))
        fast_burst("g")

        # port_map modify (to drop), then delete (the default drops), then insert again.
        client.modify(client.table_entry(pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.DROP_PACKET, {}))
        flow.send("h", 100)
        assert flow.got("h") == [], "forwarded after port_map was modified to drop"
        fast_burst_ok = client.table_entry(pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SET_EGRESS_PORT,
                                           {"port": 2})
        client.modify(fast_burst_ok)
        fast_burst("i")
        client.delete(fast_burst_ok)
        flow.send("j", 100)
        assert flow.got("j") == [], "forwarded after the port_map entry was deleted"
        client.insert(fast_burst_ok)
        fast_burst("k")
        c = settled_counters(lab, UPLINK)
        assert c.drops[DropReason.NO_ROUTE] == 200 and c.conservation_gap() == 0, c
        # After a second of silence: each burst that arrived whole arrived exactly once.
        seqs = flow.settle()
        for tag, n in bursts.items():
            assert sorted(seqs[tag]) == list(range(n)), f"burst {tag}: more than {n}: {sorted(seqs[tag])}"
        assert not set(seqs) & set("bfhj"), "a burst that was to be dropped arrived late"
    finally:
        flow.close()


def settled_counters_pd(lab: TwoHostLab, pd: int):
    from p4netem.stats import read_pd_counters

    deadline = time.monotonic() + 5
    while True:
        c = read_pd_counters(lab.client, pd)
        if c.conservation_gap() == 0 or time.monotonic() > deadline:
            return c
        time.sleep(0.1)


def pcap_records(path) -> int:
    data = path.read_bytes()
    n, off = 0, 24
    while off + 16 <= len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        off += 16 + incl
        n += 1
    return n


def test_pcap_and_off_keep_it_off(start_lab, tmp_path) -> None:
    pcaps = tmp_path / "pcap"
    for args, why in ((("--pcap", str(pcaps)), "--pcap"), (("--fast-path", "off"), "--fast-path off")):
        lab, url = metrics_lab(start_lab, *args)
        try:
            m = metrics(url)
            assert m["state"].startswith("off") and why in m["state"], m
            assert f"fast path: off ({why}" in lab.switch.log_tail(100)
            result = run_probe(lab.h1.ns, lab.h2.ns, lab.h2.ip, count=300, rate=1000, size=200, port=9051)
            assert result.received == 300
            c = settled_counters(lab, UPLINK)
            assert c.profile_in == c.profile_out == 300, c
            assert metrics(url)["packets"] == 0
        finally:
            lab.close()
    # Every frame is in the captures (the switch flushes them at exit).
    ins = [p for p in pcaps.iterdir() if p.name.startswith("1-") and p.name.endswith("_in.pcap")]
    assert len(ins) == 1 and pcap_records(ins[0]) == 300, ins


def test_bad_fast_path_value_is_a_one_line_error(switch_bin) -> None:
    bad = subprocess.run([switch_bin, "--fast-path", "yes"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--fast-path must be off, on or auto" in bad.stderr, bad.stderr
