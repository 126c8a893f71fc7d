"""`--ray HEAD:PORT` with a head that `ray start --head` put in Ray's token authentication
(docs/experiments.md "On a Ray cluster"). Ray 2.60's `ray start --head` turns token
authentication on by itself when its machine has a token (~/.ray/auth_token, which any local
`ray.init()` writes, `--ray auto`'s too), and a driver joining an explicit address never
did: the documented recipe failed on the head itself after 20 s with "Failed to connect".
`--ray` does not turn token mode on by itself (a driver in token mode fails on a cluster
without it, e.g. `ray.cluster_utils`' on the same machine): the error says what to set.
A real head (`ray start --head --block`, its own temp dir and token file), no lab."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

RAY = str(Path(sys.executable).parent / "ray")
REPO = Path(__file__).resolve().parents[2]
JOIN = textwrap.dedent("""
    import sys
    from p4netem_studies.runs.cluster import ClusterError, connect
    try:
        ray = connect(sys.argv[1])
    except ClusterError as exc:
        print(exc)
        sys.exit(2)
    print("joined", int(ray.cluster_resources().get("p4netem_lab", 0)))
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(token_path: Path) -> dict:
    # No RAY_* from the caller (RAY_AUTH_MODE set would decide for Ray), the token in a file of
    # the test's own instead of root's ~/.ray/auth_token.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_AUTH_TOKEN_PATH"] = str(token_path)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "control-plane"), str(REPO / "studies")])
    return env


@pytest.fixture(scope="module")
def token_head():
    tmp = Path(tempfile.mkdtemp(prefix="p4nray", dir="/tmp"))   # short: Ray's socket paths
    token = tmp / "auth_token"
    token.write_text(secrets.token_hex(32))
    port = _free_port()
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--port", str(port), "--temp-dir", str(tmp / "r"),
         "--num-cpus", "1", "--resources", '{"p4netem_lab": 3}', "--include-dashboard=false",
         "--disable-usage-stats"],
        env=_env(token), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert head.poll() is None, "ray start --head ended"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Ray head did not listen"
                time.sleep(0.2)
        yield f"127.0.0.1:{port}", token
    finally:
        head.send_signal(signal.SIGTERM)        # --block: it stops what it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def _join(address: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", JOIN, address], capture_output=True, text=True,
                          timeout=180, env=env)


# Ray retries a refused join for 20 s (a try a second): 2 tries are enough.
QUICK = {"RAY_gcs_server_port_wait_time_s": "2"}


def test_a_driver_in_token_mode_with_the_heads_token_joins_it(token_head):
    address, token = token_head
    res = _join(address, {**_env(token), "RAY_AUTH_MODE": "token"})
    assert res.returncode == 0 and "joined 3" in res.stdout, res.stdout + res.stderr[-2000:]


def test_a_driver_not_in_token_mode_is_told_what_to_set(token_head):
    # The documented recipe's head, joined as before: "Failed to connect to Ray cluster" after
    # 20 s, the reason only in Ray's own lines, which go to a file.
    address, token = token_head
    res = _join(address, {**_env(token), **QUICK})
    assert res.returncode == 2, res.stdout + res.stderr[-2000:]
    assert "asks for Ray's token authentication" in res.stdout and "RAY_AUTH_MODE=token" in res.stdout, res.stdout


def test_a_wrong_token_is_named_in_the_error(token_head, tmp_path):
    address, _ = token_head
    other = tmp_path / "other_token"
    other.write_text(secrets.token_hex(32))
    res = _join(address, {**_env(other), "RAY_AUTH_MODE": "token", **QUICK})
    assert res.returncode == 2, res.stdout + res.stderr[-2000:]
    assert "refused this machine's authentication token" in res.stdout and "~/.ray/auth_token" in res.stdout, res.stdout
