"""`p4netem web` while its switch is frozen (SIGSTOP: the process exists, its kernel keeps the TCP
connections open and accepts new ones, nothing answers): each request answers 503 about as fast as
with a switch that is down (test_web_switch_down.py), where the first ones used to wait for the
call deadline (5 s: "the connection is fine, the call is slow"). The web's connections send HTTP/2
keepalive PINGs (webapp/session.py); the switch answers them without ever refusing them (no GOAWAY
"too_many_pings"), so an idle web server keeps its two connections for good, and it is back with
the switch once the switch runs again."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from p4netem.lab import SwitchProcess

from webserver import WebServer

# The old server's first request took the 5-s call deadline; the fixed one about 2-3 s at most
# (a PING unanswered, or a connection attempt that never completes its handshake).
FAST_S = 4.5


def _established(port: int) -> set[str]:
    """Local addresses of the TCP connections to the switch's gRPC port (the web's, here)."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[2] for line in out.splitlines() if line.strip()}


def _timed(web: WebServer, method: str, path: str, body: object | None = None) -> tuple[int, object, float]:
    t0 = time.monotonic()
    status, answer = web.request(method, path, body)
    return status, answer, time.monotonic() - t0


FROZEN_REQUESTS = [("GET", "/api/stats", None), ("POST", "/api/apply", {"profile": "lan"}),
                   ("GET", "/api/show", None), ("GET", "/api/radio", None), ("GET", "/api/stats", None)]


def _frozen_round(web: WebServer, switch: SwitchProcess, idle_s: float) -> None:
    """SIGSTOP, `idle_s` without a request, then requests: each a 503 within FAST_S; SIGCONT, and
    both connections are back."""
    os.kill(switch.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(idle_s)
        took_all = []
        for method, path, body in FROZEN_REQUESTS:
            status, answer, took = _timed(web, method, path, body)
            took_all.append(round(took, 2))
            assert took < FAST_S, f"{method} {path} took {took:.1f} s with the switch frozen ({took_all})"
            assert status == 503, (path, status, answer)
            assert answer["code"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and "unavailable" in answer["error"], answer
            assert answer["problems"][0]["path"] == "switch", answer
        print(f"frozen {idle_s:g} s before the first request: requests took {took_all} s")
    finally:
        os.kill(switch.proc.pid, signal.SIGCONT)
    t0 = time.monotonic()
    # Each connection is back at its first request after the failure it remembers (RETRY_S).
    for method, path, body in [("GET", "/api/show", None),
                               ("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})]:
        while (status := web.request(method, path, body)[0]) != 200 and time.monotonic() - t0 < 30:
            time.sleep(0.2)
        assert status == 200, f"the web did not find the switch back ({method} {path})"
    print(f"back {time.monotonic() - t0:.1f} s after SIGCONT")
    assert [r["profile"] for r in web.request("GET", "/api/show")[1]["rules"]] == ["lan"]


def test_requests_fail_fast_while_the_switch_is_frozen_and_idle_connections_stay(switch_bin, tmp_path):
    switch = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "switch.log",
                           extra_args=["--rt-priority", "0"]).start()
    web = None
    try:
        web = WebServer(switch.grpc_addr, log=tmp_path / "web.log")
        # Open both connections: the writer's (apply; its stream, the primary role, only for the
        # write: the channel stays) and the reader's (show).
        assert web.request("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})[0] == 200
        assert web.request("GET", "/api/show")[0] == 200
        connections = _established(switch.grpc_port)
        assert len(connections) == 2, connections

        # Idle: about eight PINGs on each connection (one every KEEPALIVE_S, 0.5 s) with no data
        # between them. A server with a ping policy (grpc's C++ server: two at most in 5 minutes)
        # would close them with GOAWAY by the third; eight (it was sixteen) still catch a policy
        # more than twice as lenient.
        time.sleep(4)
        assert _established(switch.grpc_port) == connections, "the web reconnected while idle"
        status, answer = web.request("POST", "/api/apply", {"profile": "lte", "rules": ["client=10.0.0.1"]})
        assert status == 200, answer  # primary again for this write, on the same connections
        assert _established(switch.grpc_port) == connections

        # Frozen under the first request: its call fails when a PING goes unanswered (it used to
        # wait for its 5-s deadline).
        _frozen_round(web, switch, idle_s=0)
        # Frozen while idle: keepalive drops both connections before any request; the first call
        # then makes its channel connect again, to a switch whose kernel accepts the TCP connection
        # but which never answers the handshake: as fast (grpc's own connect timeout is 20 s).
        _frozen_round(web, switch, idle_s=3)
    finally:
        if switch.proc is not None and switch.proc.poll() is None:
            os.kill(switch.proc.pid, signal.SIGCONT)
        if web is not None:
            web.stop()
        switch.stop()


def test_a_failed_read_is_answered_without_a_reconnection_of_its_own(switch_bin, tmp_path):
    """The web's connection reconnects (and remembers the failure, RETRY_S): the control session's
    own retry (reconnect, read again) is off there, or a switch that stopped answering costs the
    request a second wait, a connect timeout, after the first (3.5 s instead of 1.5 s frozen). Here
    without keepalive, which would have the connection itself notice the switch gone, and a switch
    that is down: the read fails at once, where the retry waited 3 s for a switch to reconnect to."""
    from p4netem.p4rt import P4RuntimeError
    from p4netem.webapp.session import SwitchSession

    switch = SwitchProcess({}, binary=switch_bin, log_path=tmp_path / "switch.log",
                           extra_args=["--rt-priority", "0"]).start()
    session = SwitchSession(switch.grpc_addr, connect_timeout=3.0, keepalive_s=None)
    try:
        assert session.read(lambda ctl: ctl.state()).managed == {}
        switch.stop()
        t0 = time.monotonic()
        try:
            session.read(lambda ctl: ctl.state())
            raise AssertionError("read a switch that is down")
        except P4RuntimeError as err:
            assert err.code.name == "UNAVAILABLE", err
        took = time.monotonic() - t0
        assert took < 2.0, f"the read took {took:.1f} s: it reconnected (3 s) before answering"
    finally:
        session.close()
        switch.stop()
