"""Secure remote P4Runtime (issue 12 item 4), against the real p4netem-switch with a PKI made here.

Under mutual TLS a client with a certificate from the switch's client CA gets in; one without a
certificate, with a certificate from another CA, or speaking plaintext is refused. Server-only TLS
checks the switch's certificate on the client side. A non-loopback address without TLS is refused
unless forced, and an oversized request is refused (with the limit named) while the switch keeps serving.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from p4netem.control import Controller
from p4netem.lab import Resources, SwitchProcess, SwitchTls, TwoHostLab
from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import PREFIX, unique_token
from p4netem.p4rt import GrpcTls, P4RuntimeClient, P4RuntimeError, TlsConfigError
from p4netem.p4rt.tls import ENV_CA, ENV_CERT, ENV_KEY

from tlscerts import lab_pki

# Long enough for a handshake on a loaded 2-core machine, short enough for the refusals (a refused
# TLS handshake shows as a channel that never becomes ready: the client waits this long).
CONNECT_S = 4.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = lab_pki(tmp_path_factory.mktemp("pki"))
    return {**pki, "stranger_server": pki["_stranger"].issue("fake-switch", server=True)}


def _switch(switch_bin: str, tmp_path: Path, args: list[str]) -> SwitchProcess:
    resources = Resources()
    sw = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "switch.log",
                       extra_args=["--rt-priority", "0", "--grpc-rt-priority", "0", *args], resources=resources)
    sw.start()
    sw._resources_for_test = resources  # closed by the fixture
    return sw


@pytest.fixture
def mtls_switch(switch_bin, tmp_path, pki):
    if os.geteuid() != 0:
        pytest.fail("switch tests need root", pytrace=False)
    server = pki["server"]
    sw = _switch(switch_bin, tmp_path, ["--grpc-cert", str(server.cert), "--grpc-key", str(server.key),
                                        "--grpc-client-ca", str(pki["ca"])])
    try:
        yield sw
    finally:
        sw.stop()
        sw._resources_for_test.close()


@pytest.fixture
def tls_switch(switch_bin, tmp_path, pki):
    server = pki["server"]
    sw = _switch(switch_bin, tmp_path, ["--grpc-cert", str(server.cert), "--grpc-key", str(server.key)])
    try:
        yield sw
    finally:
        sw.stop()
        sw._resources_for_test.close()


def _refused(addr: str, tls: GrpcTls | None) -> P4RuntimeError:
    with pytest.raises(P4RuntimeError) as info:
        P4RuntimeClient(addr, tls=tls, timeout=CONNECT_S).connect(arbitrate=False)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    return info.value


def _all_refused(addr: str, *tls: GrpcTls | None) -> list[P4RuntimeError]:
    """_refused for each of `tls`, all at once: each refusal is a client waiting out CONNECT_S
    for a channel that never becomes ready, and the clients are independent (own channel and
    credentials), so their waits overlap instead of adding up. The errors, in `tls` order."""
    with ThreadPoolExecutor(len(tls)) as pool:
        return list(pool.map(lambda t: _refused(addr, t), tls))


def test_mutual_tls_admits_only_the_ca_s_clients(mtls_switch, pki):
    addr = mtls_switch.grpc_addr
    good = GrpcTls(ca=pki["ca"], cert=pki["client"].cert, key=pki["client"].key)
    with Controller.connect(addr, election_id=2, tls=good) as ctl:
        assert ctl.is_primary
        ctl.apply("lte")
        # Read back over the same secured channel: the rule is on the switch.
        assert [r.profile_name for r in ctl.applied()] == ["lte"]
    no_cert, _, plain = _all_refused(
        addr, GrpcTls(ca=pki["ca"]),  # no client certificate
        GrpcTls(ca=pki["ca"], cert=pki["stranger"].cert, key=pki["stranger"].key),  # another CA's
        None)  # plaintext
    assert "mutual TLS" not in no_cert.message and "TLS" in no_cert.message
    assert "plaintext" in plain.message
    # Nothing the refused clients did disturbed the switch: the first controller's rule is there.
    with Controller.connect(addr, primary=False, tls=good) as reader:
        assert [r.profile_name for r in reader.applied()] == ["lte"]


def test_the_health_check_is_behind_the_same_mutual_tls(mtls_switch, pki):
    """grpc.health.v1 (dataplane/src/p4rt/health_check.rs) is served on the P4Runtime port with its
    TLS: the CA's client gets SERVING; a plaintext client, or one without a certificate, nothing."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    addr = mtls_switch.grpc_addr
    good = GrpcTls(ca=pki["ca"], cert=pki["client"].cert, key=pki["client"].key)
    with P4RuntimeClient(addr, tls=good, timeout=CONNECT_S).connect(arbitrate=False) as c:
        assert c.health() == c.health("p4.v1.P4Runtime") == "SERVING"
    for tls in (None, GrpcTls(ca=pki["ca"])):
        channel = grpc.insecure_channel(addr) if tls is None else grpc.secure_channel(
            addr, tls.credentials(), options=tls.channel_options())
        with channel, pytest.raises(grpc.RpcError) as info:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=CONNECT_S)
        assert info.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), tls


def test_server_tls_is_checked_by_the_client(tls_switch, pki):
    addr = tls_switch.grpc_addr
    with P4RuntimeClient(addr, tls=GrpcTls(ca=pki["ca"]), timeout=CONNECT_S).connect(arbitrate=False) as c:
        assert c.get_pipeline("COOKIE_ONLY") is not None
    # A client that trusts another CA does not talk to this switch. The certificate is for
    # 127.0.0.1, localhost and p4netem-switch: another name is refused, and the override is what
    # a client uses to reach it by a name the certificate holds.
    _all_refused(addr, GrpcTls(ca=pki["stranger_ca"]), GrpcTls(ca=pki["ca"], server_name="switch.example"))
    with P4RuntimeClient(addr, tls=GrpcTls(ca=pki["ca"], server_name="p4netem-switch"),
                         timeout=CONNECT_S).connect(arbitrate=False):
        pass


def test_the_cli_reaches_a_mutual_tls_switch_through_options_or_environment(mtls_switch, pki):
    addr = mtls_switch.grpc_addr
    cli = [str(Path(sys.executable).with_name("p4netem"))]
    opts = ["--grpc-ca", str(pki["ca"]), "--grpc-cert", str(pki["client"].cert), "--grpc-key", str(pki["client"].key)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("P4NETEM_GRPC_")}
    # Plaintext (checked below): refused only once its connect timeout has passed, so it runs
    # beside the commands that get in instead of after them (a refused client changes nothing).
    plain = subprocess.Popen([*cli, "show", "-s", addr], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        r = subprocess.run([*cli, *opts, "apply", "gprs", "-s", addr], capture_output=True, text=True, timeout=60,
                           env=env)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([*cli, "show", "--json", "-s", addr], capture_output=True, text=True, timeout=60,
                           env={**env, ENV_CA: str(pki["ca"]), ENV_CERT: str(pki["client"].cert),
                                ENV_KEY: str(pki["client"].key)})
        assert r.returncode == 0 and "gprs" in r.stdout, r.stderr
        _, plain_err = plain.communicate(timeout=60)
    finally:
        if plain.poll() is None:
            plain.kill()
            plain.wait()
    assert plain.returncode == 3 and "UNAVAILABLE" in plain_err and "plaintext" in plain_err, plain_err
    r = subprocess.run([*cli, "--grpc-cert", str(pki["client"].cert), "show", "-s", addr],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "--grpc-cert needs --grpc-key" in r.stderr, r.stderr


# A line of gRPC core's own log (absl format: level letter, MMDD, time, thread, file:line]).
GRPC_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\]", re.M)


def test_the_cli_prints_its_own_tls_error_without_grpc_s_log_lines(mtls_switch, pki):
    """gRPC core logs each refused handshake itself (a wrong CA: `I1130 ... Handshake failed ...
    CERTIFICATE_VERIFY_FAILED`; no client certificate: `E1130 ... TLSV1_ALERT_CERTIFICATE_REQUIRED`
    and more), before the CLI's own error, which names the fix. The CLI keeps gRPC quiet
    (p4netem_entry.quiet_grpc_logs) unless the user sets GRPC_VERBOSITY; a program importing
    p4netem keeps gRPC's defaults."""
    addr = mtls_switch.grpc_addr
    cli = [str(Path(sys.executable).with_name("p4netem"))]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("P4NETEM_GRPC_") and k not in ("GRPC_VERBOSITY", "GRPC_TRACE")}
    runs = {  # each refused after the CLI's 5 s connect timeout: all at once
        "wrong CA": ([*cli, "--grpc-ca", str(pki["stranger_ca"]), "show", "-s", addr], env),
        "no client certificate": ([*cli, "--grpc-ca", str(pki["ca"]), "show", "-s", addr], env),
        "user's debug": ([*cli, "--grpc-ca", str(pki["ca"]), "show", "-s", addr], {**env, "GRPC_VERBOSITY": "debug"}),
    }
    procs = {name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
             for name, (cmd, e) in runs.items()}
    try:
        errs = {name: p.communicate(timeout=120)[1] for name, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    for name in ("wrong CA", "no client certificate"):
        assert procs[name].returncode == 3, errs[name]
        assert errs[name].startswith("error: switch ") and "UNAVAILABLE" in errs[name], f"{name}: {errs[name]}"
        assert not GRPC_LOG_LINE.search(errs[name]), f"{name}: gRPC's own log lines:\n{errs[name]}"
    assert procs["user's debug"].returncode == 3
    assert GRPC_LOG_LINE.search(errs["user's debug"]), errs["user's debug"]
    assert "error: switch " in errs["user's debug"]
    # Importing p4netem (its command line too) leaves gRPC's level alone: only the command sets it.
    r = subprocess.run([sys.executable, "-c", "import os, p4netem.cli, p4netem.p4rt, grpc; "
                        "print(os.environ.get('GRPC_VERBOSITY'))"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.stdout.strip() == "None", r.stdout + r.stderr
    # The user's own level, or gRPC's traces asked for, are left as they are.
    from p4netem_entry import quiet_grpc_logs
    for given, level in (({}, "NONE"), ({"GRPC_VERBOSITY": "debug"}, "debug"), ({"GRPC_TRACE": "handshaker"}, None)):
        environ = dict(given)
        quiet_grpc_logs(environ)
        assert environ.get("GRPC_VERBOSITY") == level, (given, environ)


def test_tls_options_are_checked_before_connecting(tmp_path, pki):
    with pytest.raises(TlsConfigError, match="--grpc-key needs --grpc-cert"):
        GrpcTls(key=pki["client"].key)
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(TlsConfigError, match=r"--grpc-ca .*junk.pem: not a PEM file"):
        GrpcTls(ca=tmp_path / "junk.pem").credentials()
    with pytest.raises(TlsConfigError, match=r"--grpc-cert .*missing.pem: No such file"):
        GrpcTls(cert=tmp_path / "missing.pem", key=pki["client"].key).credentials()
    assert GrpcTls.from_env({}) is None
    assert GrpcTls.from_env({ENV_CA: "/ca.pem"}) == GrpcTls(ca=Path("/ca.pem"))


def _run_switch(switch_bin: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([switch_bin, "--rt-priority", "0", "--grpc-rt-priority", "0", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_non_loopback_plaintext_is_refused_unless_forced(switch_bin, tmp_path, pki):
    port = free_tcp_port("127.0.0.1")
    r = _run_switch(switch_bin, "--grpc-addr", f"0.0.0.0:{port}")
    assert r.returncode == 1
    assert "not a loopback address" in r.stderr and "--grpc-cert" in r.stderr and "--grpc-insecure" in r.stderr
    r = _run_switch(switch_bin, "--grpc-addr", f"[::]:{port}")
    assert r.returncode == 1 and "not a loopback address" in r.stderr
    # A bad PEM file is named at start, not at the first handshake.
    (tmp_path / "junk.pem").write_text("junk")
    r = _run_switch(switch_bin, "--grpc-cert", str(tmp_path / "junk.pem"), "--grpc-key", str(pki["server"].key))
    assert r.returncode == 1 and "--grpc-cert" in r.stderr and "no PEM CERTIFICATE" in r.stderr, r.stderr
    r = _run_switch(switch_bin, "--grpc-cert", str(pki["server"].cert))
    assert r.returncode == 2 and "--grpc-key" in r.stderr  # clap: --grpc-cert requires --grpc-key
    # Forced: it serves, with a warning. In a namespace of our own, so the port is open to nobody.
    with Resources() as res:
        ns = res.namespace(f"{PREFIX}tls{unique_token()}"[:15])
        proc = ns.popen([switch_bin, "--rt-priority", "0", "--grpc-rt-priority", "0", "--grpc-addr", "0.0.0.0:9559",
                         "--grpc-insecure"], stderr=subprocess.PIPE, text=True)
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any("listening" in l for l in lines):
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
        proc.terminate()
        # communicate() drains stderr while waiting (the switch logs its shutdown there); a switch
        # that outlives SIGTERM by 30 s is a hang and fails with everything it printed (one CI run
        # saw a 10 s wait time out here, with nothing to tell why).
        try:
            _, rest = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, rest = proc.communicate()
            pytest.fail("the switch did not stop within 30 s of SIGTERM:\n" + "".join(lines) + rest)
        text = "".join(lines)
        assert "plaintext on a non-loopback address" in text and "P4Runtime server listening" in text, text + rest
        assert "SIGTERM: shutting down" in rest, text + rest


@pytest.mark.parametrize("value", ["10", "2000000000"])
def test_message_cap_out_of_range_is_named(switch_bin, value):
    r = _run_switch(switch_bin, "--grpc-max-message-bytes", value)
    assert r.returncode == 1 and "--grpc-max-message-bytes must be in 65536..=1073741824" in r.stderr, r.stderr


def test_an_oversized_request_is_refused_and_the_switch_keeps_serving(switch_bin, tmp_path, p4info):
    sw = _switch(switch_bin, tmp_path, ["--grpc-max-message-bytes", str(1 << 20)])
    try:
        with P4RuntimeClient(sw.grpc_addr, election_id=1, tls=None, timeout=CONNECT_S).connect() as c:
            with pytest.raises(P4RuntimeError) as info:
                c.set_pipeline(p4info, device_config=b"\0" * (2 << 20))
            # tonic answers an oversized message with OUT_OF_RANGE (gRPC's core library says
            # RESOURCE_EXHAUSTED); either way the client is told the limit.
            assert info.value.code == grpc.StatusCode.OUT_OF_RANGE
            assert "the limit is: 1048576 bytes" in info.value.message
            c.set_pipeline(p4info, device_config=b"\0" * (512 << 10))  # under the cap: accepted
            assert c.get_pipeline("COOKIE_ONLY") is not None
    finally:
        sw.stop()
        sw._resources_for_test.close()


def test_a_lab_runs_its_switch_under_mutual_tls(switch_bin, tmp_path, pki):
    """TwoHostLab with switch_tls/client_tls: the lab's own client, a Controller and traffic."""
    if os.geteuid() != 0:
        pytest.fail("labs need root", pytrace=False)
    server, client = pki["server"], pki["client"]
    tls = GrpcTls(ca=pki["ca"], cert=client.cert, key=client.key)
    with TwoHostLab(binary=switch_bin, log_path=tmp_path / "switch.log",
                    switch_tls=SwitchTls(server.cert, server.key, pki["ca"]), client_tls=tls).start() as lab, \
            ThreadPoolExecutor(1) as pool:
        assert "--grpc-client-ca" in lab.switch.command()
        # A plaintext client is refused (once CONNECT_S has passed: it waits beside the rest).
        plaintext = pool.submit(_refused, lab.switch.grpc_addr, None)
        with Controller.connect(lab.switch.grpc_addr, election_id=2, tls=tls) as ctl:
            ctl.apply("lan")
        r = lab.h1.ns.run(["ping", "-c", "3", "-i", "0.1", "-q", lab.h2.ip], check=False, timeout=30)
        assert r.returncode == 0, r.stdout
        plaintext.result()
