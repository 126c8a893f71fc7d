"""A write waits a moment for the primary role instead of failing at once (control/primary_wait.py).

`p4netem web` is the switch's primary (election id 1) only while it writes, and the CLI's default
election id is 1 too: a script's `p4netem apply` that met a web write (or another command) in
progress exited 3 ("election id 1 is already used by another controller"), though the same command
a moment later worked. Now the CLI (`p4netem --primary-wait`, 5 s by default) and the API
(Controller.connect(primary_wait=...), primary_role(wait)) try again while a live controller
holds the role, and fail with the old message and the wait only when it stays taken.

Real switch, real arbitration, the CLI as users run it. No test depends on how fast the machine
is: a holder releases only once the waiter has said that it waits (its stderr line), and the
times asserted are lower bounds the code guarantees or upper bounds tens of seconds away.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from p4netem.control import Controller, P4RuntimeError, parse_rule_option
from p4netem.control.session import NotPrimaryError
from p4netem.lab.free import free_tcp_port

P4NETEM = Path(sys.executable).parent / "p4netem"
ALREADY_USED = "election id 1 is already used by another controller"
WAITING = "warning: waiting up to"


def env() -> dict[str, str]:
    """The user's environment without P4NETEM_* settings (the default wait, election id 1)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("P4NETEM_")}
    e["COLUMNS"] = "300"
    return e


def cli(addr: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(P4NETEM), *args, "-s", addr], capture_output=True, text=True, timeout=timeout,
                          env=env())


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def waited(stderr: str) -> float:
    m = re.search(r"waited (\d+\.\d) s for the primary role", one_line(stderr))
    assert m, stderr
    return float(m.group(1))


def profile_of(addr: str, client: str) -> str | None:
    """The profile the rule for `client` has on the switch (`p4netem show --json`)."""
    r = cli(addr, "show", "--json")
    assert r.returncode == 0, r.stderr
    return next((rule["profile"] for rule in json.loads(r.stdout)["rules"] if rule["rule"].get("client") == client),
                None)


class WaitingCli:
    """`p4netem ARGS` started in the background; `said_it_waits()` reads its stderr until the line
    that says it waits for the primary role (False if it exited first)."""

    def __init__(self, addr: str, *args: str):
        self.proc = subprocess.Popen([str(P4NETEM), *args, "-s", addr], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env())
        self.stderr: list[str] = []

    def said_it_waits(self) -> bool:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            if line.startswith(WAITING):
                return True
        return False

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, "".join(self.stderr) + err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def stream_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "p4rt-stream" and t.is_alive())


def test_cli_apply_during_another_controllers_hold_succeeds_after_the_release(bare_switch):
    addr = bare_switch.grpc_addr
    holder = Controller.connect(addr, election_id=1, timeout=10)
    waiter = WaitingCli(addr, "apply", "lte", "--rule", "client=10.0.0.2")  # the default wait, 5 s
    try:
        assert holder.is_primary
        # The old CLI exited 3 here at once ("already used"), without a line saying it waits.
        assert waiter.said_it_waits(), waiter.finish()
        # The waiter holds no stream between its attempts: the holder goes on writing.
        holder.apply("lan", [parse_rule_option("client=10.0.0.1")])
        time.sleep(0.5)  # a few more refused attempts
        holder.apply("hspa", [parse_rule_option("client=10.0.0.1")])
        holder.close()
        code, out, err = waiter.finish()
        assert code == 0, err
        assert out.startswith("applied lte to 1 rule(s)"), out
        assert ALREADY_USED in one_line(err), err  # the line that said why it waits
    finally:
        waiter.kill()
        holder.close()
    assert profile_of(addr, "10.0.0.2") == "lte" and profile_of(addr, "10.0.0.1") == "hspa"


def test_cli_fails_after_its_wait_when_the_role_stays_taken_and_at_once_with_no_wait(bare_switch):
    addr = bare_switch.grpc_addr
    with Controller.connect(addr, election_id=1, timeout=10) as holder:
        t0 = time.monotonic()
        r = cli(addr, "--primary-wait", "2", "apply", "lte", "--rule", "client=10.0.0.2")
        elapsed = time.monotonic() - t0
        assert r.returncode == 3, r.stderr
        err = one_line(r.stderr)
        # Today's message (the switch's, naming the election id in use), then how long it waited.
        assert err.startswith(f"warning: waiting up to 2 s for the primary role: ") and \
            f"error: switch {addr}: INVALID_ARGUMENT: P4Runtime stream closed: {ALREADY_USED}" in err, err
        assert waited(r.stderr) >= 2.0 and elapsed >= 2.0, (elapsed, r.stderr)

        r = cli(addr, "--primary-wait", "0", "apply", "lte", "--rule", "client=10.0.0.2")
        assert r.returncode == 3 and ALREADY_USED in one_line(r.stderr), r.stderr
        assert "wait" not in r.stderr, r.stderr  # refused at its first attempt, as before
        r = subprocess.run([str(P4NETEM), "apply", "lte", "-s", addr], capture_output=True, text=True,
                           timeout=120, env={**env(), "P4NETEM_PRIMARY_WAIT": "0"})
        assert r.returncode == 3 and "wait" not in r.stderr, r.stderr
        assert holder.is_primary
        holder.apply("lan", [parse_rule_option("client=10.0.0.1")])  # the refusals did not disturb it

        # A higher election id is still primary at once, without waiting.
        r = cli(addr, "apply", "hspa", "--election-id", "2", "--rule", "client=10.0.0.3")
        assert r.returncode == 0 and r.stderr == "", r.stderr
    assert profile_of(addr, "10.0.0.2") is None and profile_of(addr, "10.0.0.3") == "hspa"

    # A higher election id (5) is primary: a backup waits, named in the message with the wait ...
    with Controller.connect(addr, election_id=5, timeout=10):
        r = cli(addr, "--primary-wait", "1", "apply", "lan", "--election-id", "3")
        assert r.returncode == 3, r.stderr
        err = one_line(r.stderr)
        assert "PERMISSION_DENIED: not the primary controller" in err and "below the switch's highest, 5" in err, err
        assert "the controller with election id 5 is the primary (ours is 3)" in err, err  # why it waited
        assert waited(r.stderr) >= 1.0, r.stderr
        # ... and stops as soon as that controller has gone: p4netem-switch keeps the highest id it
        # has seen (P4Runtime), so id 3 can never take over; no wait would change that.
        waiter = WaitingCli(addr, "--primary-wait", "600", "apply", "lan", "--election-id", "3")
        try:
            assert waiter.said_it_waits(), waiter.finish()
        except BaseException:
            waiter.kill()
            raise
    try:
        t0 = time.monotonic()
        code, _, err = waiter.finish(timeout=120)
        assert code == 3 and "below the switch's highest, 5" in one_line(err), err
        assert time.monotonic() - t0 < 60, err  # not its 600 s
    finally:
        waiter.kill()


def test_api_connect_and_primary_role_wait_for_the_role(bare_switch):
    addr = bare_switch.grpc_addr
    rule = [parse_rule_option("client=10.0.0.1")]
    holder = Controller.connect(addr, election_id=1, timeout=10)
    release = threading.Timer(1.5, holder.close)
    release.start()
    t0 = time.monotonic()
    with Controller.connect(addr, election_id=1, timeout=10, primary_wait=60) as ctl:
        assert ctl.is_primary and time.monotonic() - t0 >= 0.5  # it did wait for the holder
        ctl.apply("lte", rule)
        release.join(timeout=60)  # the holder's close() has returned
        # Some ten refused attempts left no stream behind: ctl's own is the only one.
        assert stream_threads() == 1
    assert profile_of(addr, "10.0.0.1") == "lte"

    # Without a wait, as before: refused at once.
    with Controller.connect(addr, election_id=1, timeout=10):
        with pytest.raises(P4RuntimeError) as refused:
            Controller.connect(addr, election_id=1, timeout=10)
        assert ALREADY_USED in refused.value.message and "waited" not in refused.value.message
        with pytest.raises(P4RuntimeError) as refused:
            Controller.connect(addr, election_id=1, timeout=10, primary_wait=1)
        assert ALREADY_USED in refused.value.message and "waited" in refused.value.message

    # primary_role (the web's writes): waits for a holder with our id, then writes.
    reader = Controller.connect(addr, election_id=1, primary=False, timeout=10)
    try:
        holder = Controller.connect(addr, election_id=1, timeout=10)
        release = threading.Timer(1.5, holder.close)
        release.start()
        with reader.primary_role(wait=60):
            reader.apply("hspa", rule)
        release.join(timeout=60)
        assert not reader.client.arbitrating and stream_threads() == 0
        # A holder that stays: NotPrimaryError naming it, with the wait.
        with Controller.connect(addr, election_id=1, timeout=10):
            with pytest.raises(NotPrimaryError) as refused:
                with reader.primary_role(wait=1):
                    pass
            assert refused.value.holder == 1 and ALREADY_USED in refused.value.message
            assert waited(refused.value.message) >= 1.0
        # Bad waits are refused before anything is opened.
        for bad in (-1, float("nan"), "2", True):
            with pytest.raises(ValueError, match="wait"):
                with reader.primary_role(wait=bad):
                    pass
            with pytest.raises(ValueError, match="primary_wait"):
                Controller.connect(addr, primary_wait=bad)
    finally:
        reader.close()
    assert profile_of(addr, "10.0.0.1") == "hspa"

    # Nothing else is waited on: a role the switch does not know (INVALID_ARGUMENT too), a switch
    # that is not there (its connect timeout, 1 s here).
    for kwargs in ({"address": addr, "role": "other"},
                   {"address": f"127.0.0.1:{free_tcp_port()}", "connect_timeout": 1}):
        t0 = time.monotonic()
        with pytest.raises(P4RuntimeError) as failed:
            Controller.connect(**kwargs, timeout=10, primary_wait=120)
        assert time.monotonic() - t0 < 60 and "waited" not in failed.value.message, failed.value.message
