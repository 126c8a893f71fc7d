"""A refused TLS client is named in the switch's log (dataplane/src/p4rt/handshake.rs).

Before, a client with a CA that does not trust the switch, a wrong server name, no client
certificate, another CA's or a v1 client certificate, or plaintext against the TLS port got
UNAVAILABLE and the switch's log said nothing, so an operator could not tell why controllers were
refused. Now each failed handshake is a warning naming the peer (address:port) and rustls's reason;
a handshake that stalls is ended after --grpc-handshake-timeout-ms (10 s by default) without holding
other clients; a flood of bad connections is logged 10 lines per window (10 s by default) plus one
line counting the rest, all of them counted in /metrics; and at most --grpc-max-pending-handshakes
are in progress, a connection beyond closing the oldest, so that a flood of stalled connections
does not hold a controller out. Good clients connect before, during and after. The peers here are
raw sockets (Python's ssl, OpenSSL) whose source port the test knows, and grpcio clients, as
controllers are. The tests shorten the timeout and the log's window so as not to wait 10 s for them.
"""

from __future__ import annotations

import os
import re
import select
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from p4netem.control import Controller
from p4netem.lab import Resources, SwitchProcess
from p4netem.lab.free import free_tcp_port
from p4netem.p4rt import GrpcTls, P4RuntimeClient, P4RuntimeError

from tlscerts import Authority, Pair, lab_pki

# A refused grpcio client waits this long (its attempts each log a line: kept short so that a
# test's failures stay within the 10 lines the switch logs per 10 s).
REFUSED_S = 1.5
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # what a plaintext gRPC client sends first
LOG_WAIT_S = 40.0  # generous: a stall line comes STALL_MS after its connect, on a loaded machine
STALL_MS = 1500  # --grpc-handshake-timeout-ms of the stall test (the default, 10 s, is checked at start)
LOG_WINDOW_MS = 3000  # the flood test's window of the failure log (hidden --grpc-handshake-log-window-ms)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    pki = lab_pki(d)
    return {**pki, "v1": _v1_client(d, pki["_ca"])}


def _v1_client(d: Path, ca: Authority) -> Pair:
    """A client certificate the CA signs with `openssl x509 -req` and no -extfile: X.509 v1."""
    pair = Pair(d / "v1.pem", d / "v1.key")
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)  # noqa: E731
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=v1-operator",
        "-keyout", str(pair.key), "-out", str(d / "v1.csr"))
    run("x509", "-req", "-in", str(d / "v1.csr"), "-CA", str(ca.pem), "-CAkey", str(d / "p4netem-test-ca.key"),
        "-CAcreateserial", "-days", "1", "-out", str(pair.cert))
    return pair


@pytest.fixture
def start_mtls_switch(switch_bin, tmp_path, pki):
    """Starts a switch under mutual TLS with extra flags; it is stopped after the test."""
    if os.geteuid() != 0:
        pytest.fail("switch tests need root", pytrace=False)
    started: list[tuple[SwitchProcess, Resources]] = []

    def start(*flags: str) -> SwitchProcess:
        resources = Resources()
        server = pki["server"]
        metrics = f"127.0.0.1:{free_tcp_port('127.0.0.1')}"
        sw = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / f"switch{len(started)}.log",
                           resources=resources,
                           extra_args=["--rt-priority", "0", "--grpc-rt-priority", "0", "--metrics-addr", metrics,
                                       "--grpc-cert", str(server.cert), "--grpc-key", str(server.key),
                                       "--grpc-client-ca", str(pki["ca"]), *flags])
        sw.metrics_addr = metrics
        started.append((sw, resources))
        sw.start()
        return sw

    try:
        yield start
    finally:
        for sw, resources in started:
            sw.stop()
            resources.close()


@pytest.fixture
def mtls_switch(start_mtls_switch):
    return start_mtls_switch()


def _good(sw: SwitchProcess, pki) -> GrpcTls:
    return GrpcTls(ca=pki["ca"], cert=pki["client"].cert, key=pki["client"].key)


def _good_client_works(sw: SwitchProcess, pki) -> None:
    with P4RuntimeClient(sw.grpc_addr, tls=_good(sw, pki), timeout=10).connect(arbitrate=False) as c:
        assert c.get_pipeline("COOKIE_ONLY") is not None


def _connect(sw: SwitchProcess) -> tuple[socket.socket, int]:
    s = socket.create_connection(("127.0.0.1", sw.grpc_port), timeout=30)
    return s, s.getsockname()[1]


def _until_closed(s: socket.socket) -> bool:
    """Reads until the switch closes (it sends its alert first): the switch has read what we sent.
    False if it did not close within the socket's timeout."""
    try:
        while s.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        pass
    return True


def _plaintext(sw: SwitchProcess) -> int:
    s, port = _connect(sw)
    with s:
        s.sendall(PREFACE)
        _until_closed(s)
    return port


def _tls(sw: SwitchProcess, ca: Path, cert: Pair | None = None, server_name: str = "127.0.0.1") -> int:
    """A TLS client (OpenSSL) that trusts `ca` and presents `cert`; the handshake must fail."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.set_alpn_protocols(["h2"])
    if cert is not None:
        ctx.load_cert_chain(cert.cert, cert.key)
    s, port = _connect(sw)
    with s:
        try:
            # TLS 1.3: a client learns that the server refused its certificate at its first read.
            with ctx.wrap_socket(s, server_hostname=server_name) as t:
                t.sendall(PREFACE)
                _until_closed(t)
        except (ssl.SSLError, OSError):
            pass  # the refusal, as the client sees it; what the switch logs is checked by the caller
    return port


def _refused_grpc(sw: SwitchProcess, tls: GrpcTls) -> None:
    with pytest.raises(P4RuntimeError):
        P4RuntimeClient(sw.grpc_addr, tls=tls, timeout=REFUSED_S).connect(arbitrate=False)


def _failures(sw: SwitchProcess) -> list[str]:
    return [line for line in sw.log_path.read_text(errors="replace").splitlines()
            if ("TLS handshake from" in line and "failed" in line) or "right after the TLS handshake" in line]


def _wait_for(sw: SwitchProcess, done, what: str) -> list[str]:
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        lines = sw.log_path.read_text(errors="replace").splitlines()
        if done(lines):
            return lines
        if time.monotonic() > deadline:
            pytest.fail(f"switch log: no {what} within {LOG_WAIT_S} s:\n" + "\n".join(lines[-30:]))
        time.sleep(0.2)


def _logged(sw: SwitchProcess, port: int, reason: str) -> str:
    """The switch's warning for the peer 127.0.0.1:`port`, which must give `reason`."""
    peer = f"TLS handshake from 127.0.0.1:{port} failed: "
    lines = _wait_for(sw, lambda ls: any(peer in line for line in ls), f"line for peer port {port}")
    line = next(line for line in lines if peer in line)
    assert "WARN" in line and reason in line, line
    return line


def _metric(sw: SwitchProcess, name: str) -> float:
    with urllib.request.urlopen(f"http://{sw.metrics_addr}/metrics", timeout=30) as r:
        text = r.read().decode()
    m = re.search(rf"^{name}(?:_total)? (\S+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


def test_each_refused_client_is_logged_with_its_peer_and_reason(mtls_switch, pki):
    sw = mtls_switch
    # The defaults, as the switch states them at start: nginx's kind of handshake timeout, 10 s.
    _wait_for(sw, lambda ls: any("TLS handshakes: each ended after 10 s (--grpc-handshake-timeout-ms), at most 256 "
                                 "in progress (--grpc-max-pending-handshakes" in line for line in ls),
              "start line with the default handshake limits")
    _good_client_works(sw, pki)
    ports = {
        "plaintext": _plaintext(sw),
        "wrong CA": _tls(sw, pki["stranger_ca"], pki["client"]),
        "no certificate": _tls(sw, pki["ca"]),
        "another CA's certificate": _tls(sw, pki["ca"], pki["stranger"]),
        "v1 certificate": _tls(sw, pki["ca"], pki["v1"]),
        "wrong name": _tls(sw, pki["ca"], pki["client"], server_name="switch.example"),
    }
    _logged(sw, ports["plaintext"], "InvalidContentType (not TLS: a plaintext client?)")
    _logged(sw, ports["wrong CA"], "received fatal alert: UnknownCA (the client does not accept the switch's certificate")
    _logged(sw, ports["no certificate"], "peer sent no certificates (mutual TLS: the client gave no certificate)")
    _logged(sw, ports["another CA's certificate"], "UnknownIssuer (the client's certificate is not signed by --grpc-client-ca)")
    _logged(sw, ports["v1 certificate"], "UnsupportedCertVersion")
    _logged(sw, ports["v1 certificate"], "must be v3")
    _logged(sw, ports["wrong name"], "received fatal alert: BadCertificate")
    # grpcio (BoringSSL) refuses without an alert: during the handshake for another CA, right after
    # it for a name the certificate does not hold. Their source ports are grpc's: the reason is checked.
    before = len(_failures(sw))
    _refused_grpc(sw, GrpcTls(ca=pki["stranger_ca"], cert=pki["client"].cert, key=pki["client"].key))
    _wait_for(sw, lambda ls: any("closed the connection during the handshake" in line for line in ls),
              "line for grpcio's refusal of another CA")
    _refused_grpc(sw, GrpcTls(ca=pki["ca"], cert=pki["client"].cert, key=pki["client"].key,
                              server_name="switch.example"))
    _wait_for(sw, lambda ls: any(re.search(r"TLS client 127\.0\.0\.1:\d+ closed the connection right after the "
                                           r"TLS handshake without sending a request", line)
                                 for line in ls), "line for grpcio's refusal of the switch's name")
    grpc_lines = _failures(sw)[before:]
    assert grpc_lines and all(re.search(r"TLS (handshake from|client) 127\.0\.0\.1:\d+ ", line) for line in grpc_lines)
    # None of it disturbed the switch, and a good client was never reported.
    _good_client_works(sw, pki)
    with Controller.connect(sw.grpc_addr, election_id=2, tls=_good(sw, pki)) as ctl:
        ctl.apply("lte")
        assert [r.profile_name for r in ctl.applied()] == ["lte"]
    # Each failure counted (10 at most are logged per 10 s: these few were, unless grpcio retried often).
    assert _metric(sw, "p4netem_switch_p4runtime_tls_handshake_failures") >= len(_failures(sw)) >= 6 + 2


def test_a_stalled_handshake_holds_no_one_and_is_ended(start_mtls_switch, pki):
    sw = start_mtls_switch("--grpc-handshake-timeout-ms", str(STALL_MS))
    silent, silent_port = _connect(sw)  # a client that connects and says nothing
    half, half_port = _connect(sw)      # one that starts a TLS handshake and stops
    with silent, half:
        half.sendall(b"\x16\x03\x01\x00\xff")  # a TLS record header announcing a ClientHello it never sends
        # Both stalled connections are open: good clients are served meanwhile.
        _good_client_works(sw, pki)
        with Controller.connect(sw.grpc_addr, election_id=2, tls=_good(sw, pki)) as ctl:
            assert ctl.is_primary
        _logged(sw, silent_port, "no handshake within 1.5 s")
        _logged(sw, half_port, "no handshake within 1.5 s")
        # The switch closed them.
        assert _until_closed(silent) and _until_closed(half)
    _good_client_works(sw, pki)


def test_a_flood_of_bad_clients_is_rate_limited_and_counted(start_mtls_switch, pki):
    window_s = LOG_WINDOW_MS // 1000
    sw = start_mtls_switch("--grpc-handshake-log-window-ms", str(LOG_WINDOW_MS))
    _good_client_works(sw, pki)
    n = 25
    for _ in range(n):
        _plaintext(sw)
    _good_client_works(sw, pki)
    suppressed = re.compile(rf"WARN .*?\b(\d+) more failed TLS handshakes in the last {window_s} s not logged "
                            rf"\(at most 10 are per {window_s} s\)")

    def accounted(lines: list[str]) -> int:
        logged = sum("TLS handshake from" in line for line in lines)
        return logged + sum(int(m.group(1)) for line in lines if (m := suppressed.search(line)))

    lines = _wait_for(sw, lambda ls: accounted(ls) >= n, f"account of all {n} failures (lines plus summaries)")
    logged = [line for line in lines if "TLS handshake from" in line]
    summaries = [line for line in lines if suppressed.search(line)]
    assert accounted(lines) == n, "\n".join(logged + summaries)
    # 10 lines a window: the connections above take well under 3 s, unless the machine is very slow.
    assert summaries and len(logged) <= 10 * len(summaries) + 10, "\n".join(logged + summaries)
    assert _metric(sw, "p4netem_switch_p4runtime_tls_handshake_failures") == n
    _good_client_works(sw, pki)


CAP = 32        # --grpc-max-pending-handshakes of the eviction test
BEYOND = 300    # idle connections beyond it


def _open(s: socket.socket) -> bool:
    """Whether the switch still holds `s` open: the switch sends nothing before a ClientHello, so
    a readable socket is one it closed (EOF or reset)."""
    return not select.select([s], [], [], 0)[0]


def test_a_flood_of_stalled_connections_beyond_the_cap_does_not_hold_a_controller_out(start_mtls_switch, pki):
    # A handshake timeout far beyond the test: only evictions free a place.
    sw = start_mtls_switch("--grpc-max-pending-handshakes", str(CAP), "--grpc-handshake-timeout-ms", "300000")
    _wait_for(sw, lambda ls: any(f"at most {CAP} in progress (--grpc-max-pending-handshakes" in line for line in ls),
              "start line with the cap")
    flood: list[tuple[socket.socket, int]] = []
    try:
        for i in range(CAP + BEYOND):
            s, port = _connect(sw)
            if i % 2:
                s.sendall(b"\x16\x03\x01\x00\xff")  # half of them start a ClientHello and stall
            flood.append((s, port))
        # The oldest BEYOND were closed to admit the newer ones; the newest CAP are still open.
        for s, _ in flood[:BEYOND]:
            assert _until_closed(s), "an idle connection beyond the cap was not closed"
        assert all(_open(s) for s, _ in flood[BEYOND:]), "one of the newest connections within the cap was closed"
        line = _logged(sw, flood[0][1], f"{CAP} handshakes were in progress (--grpc-max-pending-handshakes {CAP}")
        assert "closed unfinished after " in line, line
        # With all CAP places held by stalled connections, a controller arbitrates and writes at once.
        with Controller.connect(sw.grpc_addr, election_id=2, tls=_good(sw, pki), timeout=30) as ctl:
            assert ctl.is_primary  # its MasterArbitrationUpdate
            ctl.apply("lte")       # a Write
            assert [r.profile_name for r in ctl.applied()] == ["lte"]
        # Each eviction counted, with the failures; the controller's own connections evicted a few
        # more of the stalled ones.
        evicted = _metric(sw, "p4netem_switch_p4runtime_tls_handshakes_evicted")
        assert BEYOND <= evicted <= BEYOND + CAP, evicted
        assert _metric(sw, "p4netem_switch_p4runtime_tls_handshake_failures") >= evicted
    finally:
        for s, _ in flood:
            s.close()


@pytest.mark.parametrize(("flag", "value", "error"), [
    ("--grpc-handshake-timeout-ms", "99", "--grpc-handshake-timeout-ms must be in 100..=300000 (got 99)"),
    ("--grpc-handshake-timeout-ms", "300001", "--grpc-handshake-timeout-ms must be in 100..=300000 (got 300001)"),
    ("--grpc-max-pending-handshakes", "0", "--grpc-max-pending-handshakes must be in 1..=65536 (got 0)"),
    ("--grpc-max-pending-handshakes", "65537", "--grpc-max-pending-handshakes must be in 1..=65536 (got 65537)"),
])
def test_handshake_limits_out_of_range_are_named(switch_bin, flag, value, error):
    r = subprocess.run([switch_bin, "--rt-priority", "0", "--grpc-rt-priority", "0", flag, value],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and error in r.stderr, r.stderr
