"""`p4netem web` is a controller of the switch only while it writes (webapp/session.py): each write
opens the StreamChannel, arbitrates with its election id, writes and closes the stream; a timeline
holds it while it plays. It used to keep its writer's stream (election id 1 by default) for as long
as it ran, so the CLI with the default election id exited 3 beside it ("election id 1 is already
used by another controller"), and so did a `p4netem switch` service restarted under it once the
web's writer had reconnected. Here the real web (election id 1) and the real switch, with the real
CLI and a `p4netem switch` service as the other controllers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

import pytest

from p4netem.control import Controller, parse_rule_option
from p4netem.lab.free import free_tcp_port

from webserver import P4NETEM, WebServer

ALREADY_USED = "election id 1 is already used by another controller"


def cli(addr: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with the default election id (1)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("P4NETEM_")}
    env["COLUMNS"] = "200"
    return subprocess.run([str(P4NETEM), *args, "-s", addr], capture_output=True, text=True, timeout=120, env=env)


def profiles(web: WebServer) -> dict[str, str]:
    status, body = web.request("GET", "/api/show")
    assert status == 200, body
    # Keyed by client address; the default rule (all traffic between ports 1 and 2) as "*".
    return {r["rule"]["client"] if isinstance(r["rule"].get("client"), str) else "*": r["profile"]
            for r in body["rules"]}


def apply(web: WebServer, profile: str, client: str = "10.0.0.1") -> tuple[int, dict]:
    return web.request("POST", "/api/apply", {"profile": profile, "rules": [f"client={client}"]})


@pytest.fixture
def web(bare_switch, tmp_path):
    server = WebServer(bare_switch.grpc_addr, log=tmp_path / "web.log", election_id=1)
    try:
        yield server
    finally:
        server.stop()


def test_the_cli_with_the_default_election_id_writes_after_a_web_write_and_a_higher_id_is_named(
        bare_switch, web):
    addr = bare_switch.grpc_addr
    assert apply(web, "lan")[0] == 200
    # Right after the web's answer: its stream is closed by then, not a moment later.
    r = cli(addr, "apply", "lte", "--rule", "client=10.0.0.2")
    assert r.returncode == 0, r.stderr  # the old web held election id 1: exit 3, ALREADY_USED
    r = cli(addr, "set", "delay=40ms", "--rule", "client=10.0.0.2")
    assert r.returncode == 0, r.stderr
    # And the web writes again once the CLI has gone.
    assert apply(web, "hspa")[0] == 200
    assert profiles(web) == {"10.0.0.1": "hspa", "10.0.0.2": "lte"}

    # A controller with a higher election id is primary: a web write is 409 naming it.
    with Controller.connect(addr, election_id=5, timeout=10) as other:
        assert other.is_primary
        status, body = apply(web, "lte")
        assert status == 409, body
        assert body["code"] == "PERMISSION_DENIED" and body["election_id"] == 5, body
        assert "the controller with election id 5 is the primary (ours is 1)" in body["error"], body
        assert profiles(web) == {"10.0.0.1": "hspa", "10.0.0.2": "lte"}  # nothing written; reads go on
    # Gone, but the switch keeps the highest election id it has seen (P4Runtime): the web's 1 is
    # below it for as long as the switch runs. Said so, rather than a bare PERMISSION_DENIED.
    status, body = apply(web, "lte")
    assert status == 409 and body["election_id"] is None, body
    assert "our election id 1 is below the highest the switch has seen, 5" in body["error"], body


def _service(addr: str, switch_bin: str, profile: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("P4NETEM_")}
    return subprocess.Popen([str(P4NETEM), "switch", "--switch", addr, "--binary", switch_bin, "--rt-priority", "0",
                             "--apply", profile], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _running(proc: subprocess.Popen[str], timeout: float = 90) -> str:
    """Lines of `p4netem switch` until it says it is running (fails if it exits first)."""
    out = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        out.append(line)
        if "p4netem-switch running" in line:
            return "".join(out)
    proc.wait(timeout=30)
    raise AssertionError(f"p4netem switch exited {proc.returncode}:\n{''.join(out)}{proc.stderr.read()}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_switch_service_restarts_under_the_web(switch_bin, tmp_path):
    """`p4netem switch --apply` stopped and started again on its address while the web (election
    id 1, like the service's start-up writes) runs beside it and has written: the restart starts,
    and the web writes to the new switch."""
    addr = f"127.0.0.1:{free_tcp_port()}"
    first = _service(addr, switch_bin, "lan")
    web = None
    second = None
    try:
        _running(first)
        web = WebServer(addr, log=tmp_path / "web.log", election_id=1)
        assert apply(web, "lte")[0] == 200
        _stop(first)
        assert first.returncode == 0
        second = _service(addr, switch_bin, "hspa")
        _running(second)
        deadline = time.monotonic() + 30
        while (status := apply(web, "lte", "10.0.0.9")[0]) != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert status == 200
        assert profiles(web) == {"*": "hspa", "10.0.0.9": "lte"}  # the service's start profile, and the web's
    finally:
        if web is not None:
            web.stop()
        for proc in (first, second):
            if proc is not None:
                _stop(proc)


TIMELINE_TO_THE_END = """
name: short
steps:
  - apply: lan
  - at: 1s
    apply: lte
"""

TIMELINE_TO_STOP = """
name: long
steps:
  - apply: lan
  - at: 2s
    apply: lte
  - wait: 300s
"""


def _timeline(web: WebServer, yaml: str) -> None:
    status, body = web.request("POST", "/api/timelines", {"yaml": yaml, "rules": ["client=10.0.0.1"]})
    assert status == 202, body


def _timeline_done(web: WebServer, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while (body := web.request("GET", "/api/timelines")[1])["running"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not body["running"], body
    return body


def test_a_web_timeline_holds_the_primary_role_until_it_ends_or_is_stopped(bare_switch, web):
    addr = bare_switch.grpc_addr
    # Stopped: the CLI is refused while it plays, and the timeline goes on regardless.
    _timeline(web, TIMELINE_TO_STOP)
    r = cli(addr, "apply", "hspa", "--rule", "client=10.0.0.2")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert ALREADY_USED in re.sub(r"\s+", " ", r.stderr), r.stderr
    assert web.request("GET", "/api/timelines")[1]["running"]
    deadline = time.monotonic() + 60
    while profiles(web).get("10.0.0.1") != "lte" and time.monotonic() < deadline:
        time.sleep(0.1)  # its second step, at 2 s
    assert profiles(web) == {"10.0.0.1": "lte"}
    status, body = web.request("DELETE", "/api/timelines")
    assert status == 200 and not body["running"] and body["stopped"] and body["error"] is None, body
    assert body["events"] == 2, body
    r = cli(addr, "apply", "hspa", "--rule", "client=10.0.0.2")
    assert r.returncode == 0, r.stderr

    # To its end: released then, without a stop.
    _timeline(web, TIMELINE_TO_THE_END)
    body = _timeline_done(web)
    assert body["error"] is None and not body["stopped"] and body["events"] == 2, body
    r = cli(addr, "set", "delay=30ms", "--rule", "client=10.0.0.2")
    assert r.returncode == 0, r.stderr  # the old web kept the role after its timeline: exit 3
    assert profiles(web) == {"10.0.0.1": "lte", "10.0.0.2": "hspa"}


def test_web_writes_back_to_back_and_after_a_restart_and_another_id_1_controller_writes_between(
        bare_switch, web):
    answers: list[tuple[int, object]] = []

    def writer(client: str) -> None:
        for i in range(8):
            answers.append(apply(web, "lte" if i % 2 else "lan", client))
            answers.append(web.request("POST", "/api/set", {"changes": {"delay": f"{10 + i}ms"},
                                                            "rules": [f"client={client}"]}))

    threads = [threading.Thread(target=writer, args=(f"10.0.0.{n}",)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [s for s, _ in answers] == [200] * 32, [a for a in answers if a[0] != 200][:3]
    assert web.request("POST", "/api/reset", {"rules": ["client=10.0.0.2"]}) == (200, {"removed": 1})
    assert profiles(web) == {"10.0.0.1": "lte"}

    # The switch restarted while the web was idle: its first write there works.
    bare_switch.stop()
    bare_switch.start()  # the same port
    status, body = apply(web, "hspa")
    assert status == 200, body
    assert apply(web, "lan", "10.0.0.3")[0] == 200
    assert profiles(web) == {"10.0.0.1": "hspa", "10.0.0.3": "lan"}

    # What a `p4netem switch` service restarted under the web does at start-up (Controller.connect
    # with election id 1, then its writes), after the web's writer found the restarted switch: the
    # old web held election id 1 from its first write there on.
    with Controller.connect(bare_switch.grpc_addr, election_id=1, timeout=10) as ctl:
        assert ctl.is_primary
        ctl.apply("lte", [parse_rule_option("client=10.0.0.1")])
        # Meanwhile a web write is refused, naming the controller in the way; nothing else stops.
        status, body = apply(web, "lan")
        assert status == 409, body
        assert body["code"] == "INVALID_ARGUMENT" and body["election_id"] == 1 and ALREADY_USED in body["error"], body
        assert profiles(web) == {"10.0.0.1": "lte", "10.0.0.3": "lan"}
        assert web.request("GET", "/api/stats")[0] == 200
    assert apply(web, "lan")[0] == 200  # the other controller left: the web writes again


def _web_waits(web: WebServer, request: threading.Thread, timeout: float = 60) -> bool:
    """Whether the web said that a write waits for the primary role (its log) before `request`
    ended."""
    deadline = time.monotonic() + timeout
    while request.is_alive() and time.monotonic() < deadline:
        if "warning: waiting up to" in web.log.read_text():
            return True
        time.sleep(0.02)
    return "warning: waiting up to" in web.log.read_text()


def test_a_web_write_waits_for_a_short_hold_and_answers_409_only_when_the_role_stays_taken(bare_switch, web,
                                                                                           tmp_path):
    """A CLI command (here: a controller with the CLI's election id 1) writing when a web write
    comes: the web waits for it (--primary-wait, 2 s by default) instead of answering 409 at once
    (the old web did); a role that stays taken is still 409, after the wait."""
    addr = bare_switch.grpc_addr
    holder = Controller.connect(addr, election_id=1, timeout=10)
    answers: list[tuple[int, object]] = []
    request = threading.Thread(target=lambda: answers.append(apply(web, "lte")))
    try:
        request.start()
        said = _web_waits(web, request)
        holder.apply("hspa", [parse_rule_option("client=10.0.0.2")])  # the waiting web does not block it
    finally:
        holder.close()
        request.join(timeout=120)
    assert answers and answers[0][0] == 200, answers  # the old web: 409, at once
    assert said, web.log.read_text()
    assert profiles(web) == {"10.0.0.1": "lte", "10.0.0.2": "hspa"}

    with Controller.connect(addr, election_id=1, timeout=10) as stays:
        t0 = time.monotonic()
        status, body = apply(web, "lan")
        assert status == 409, body
        assert body["code"] == "INVALID_ARGUMENT" and body["election_id"] == 1 and ALREADY_USED in body["error"], body
        m = re.search(r"waited (\d+\.\d) s for the primary role", body["error"])
        assert m and float(m.group(1)) >= 2.0 and time.monotonic() - t0 >= 2.0, body
        assert stays.is_primary
        # --primary-wait 0: at once, as before.
        at_once = WebServer(addr, "--primary-wait", "0", log=tmp_path / "web0.log", election_id=1)
        try:
            status, body = apply(at_once, "lan")
            assert status == 409 and ALREADY_USED in body["error"] and "waited" not in body["error"], body
        finally:
            at_once.stop()
    assert profiles(web) == {"10.0.0.1": "lte", "10.0.0.2": "hspa"}
