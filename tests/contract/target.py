"""Starts a fresh p4netem-switch and reads the P4Info it reports over P4Runtime.

The switch serves its own P4Info from GetForwardingPipelineConfig before any Set (after a Set it
returns what was pushed), so the process is always started here, never reused.

It is first started with no data-plane port. If it refuses to run without one, it is started
again inside a private network namespace (`p4nct<pid>`) on a veth pair there; the gRPC client
then runs in that namespace too (this file, as a script), since its loopback is private.

Run as a script: `python target.py fetch ADDR DEVICE_ID` prints the P4Info in text format.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import grpc
from google.protobuf import text_format

import p4runtime_types as pt

ROOT = Path(__file__).resolve().parents[2]
SWITCH_BIN = Path(os.environ.get("P4NETEM_SWITCH", ROOT / "dataplane" / "target" / "release" / "p4netem-switch"))
DEVICE_ID = 1
START_TIMEOUT_S = 20.0


def fetch_p4info(addr: str, device_id: int = DEVICE_ID, timeout: float = 10.0):
    req_cls = pt.message_class("p4.v1.GetForwardingPipelineConfigRequest")
    resp_cls = pt.message_class("p4.v1.GetForwardingPipelineConfigResponse")
    request = req_cls(device_id=device_id,
                      response_type=pt.enum_value("p4.v1.GetForwardingPipelineConfigRequest.ResponseType",
                                                  "P4INFO_AND_COOKIE"))
    with grpc.insecure_channel(addr) as channel:
        call = channel.unary_unary("/p4.v1.P4Runtime/GetForwardingPipelineConfig",
                                   request_serializer=req_cls.SerializeToString,
                                   response_deserializer=resp_cls.FromString)
        response = call(request, timeout=timeout)
    if not response.config.HasField("p4info"):
        raise AssertionError("GetForwardingPipelineConfig(P4INFO_AND_COOKIE) returned no p4info")
    return response.config.p4info


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc: subprocess.Popen, port: int, netns: str | None, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"p4netem-switch exited with {proc.returncode}: {log.read_text()[-2000:]}")
        probe = ["ip", "netns", "exec", netns, sys.executable, "-c",
                 f"import socket; socket.create_connection(('127.0.0.1', {port}), 0.2).close()"] if netns else None
        try:
            if probe:
                subprocess.run(probe, check=True, capture_output=True, timeout=5)
            else:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except (OSError, subprocess.CalledProcessError):
            if time.monotonic() > deadline:
                raise TimeoutError(f"p4netem-switch did not open its gRPC port in {START_TIMEOUT_S:.0f} s: "
                                   f"{log.read_text()[-2000:]}")
            time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def _switch(args: list[str], netns: str | None) -> Iterator[str]:
    port = _free_port()
    cmd = (["ip", "netns", "exec", netns] if netns else []) + [
        str(SWITCH_BIN), *args, "--grpc-addr", f"127.0.0.1:{port}", "--device-id", str(DEVICE_ID)]
    with tempfile.NamedTemporaryFile(prefix="p4nct-switch-", suffix=".log", delete=False) as logf:
        log = Path(logf.name)
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    try:
        _wait_listening(proc, port, netns, log)
        yield f"127.0.0.1:{port}"
    finally:
        _stop(proc)
        log.unlink(missing_ok=True)


@contextmanager
def _netns_with_veth() -> Iterator[tuple[str, list[str]]]:
    ns = f"p4nct{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        for cmd in (["ip", "-n", ns, "link", "set", "lo", "up"],
                    ["ip", "-n", ns, "link", "add", "p4nct0", "type", "veth", "peer", "name", "p4nct1"],
                    ["ip", "-n", ns, "link", "set", "p4nct0", "up"],
                    ["ip", "-n", ns, "link", "set", "p4nct1", "up"]):
            subprocess.run(cmd, check=True, capture_output=True)
        yield ns, ["-i", "1@p4nct0", "-i", "2@p4nct1"]
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def target_p4info():
    """Start a fresh switch, return the P4Info it reports. Raises with the switch log on failure."""
    if not SWITCH_BIN.exists():
        raise FileNotFoundError(f"{SWITCH_BIN} is not built: run `cargo build --release` in dataplane/")
    try:
        with _switch([], None) as addr:
            return fetch_p4info(addr)
    except RuntimeError as portless_failure:
        # The switch exited on its own: it probably wants at least one port.
        try:
            with _netns_with_veth() as (ns, port_args), _switch(port_args, ns) as addr:
                out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, "fetch", addr,
                                      str(DEVICE_ID)], capture_output=True, text=True, timeout=60)
                if out.returncode != 0:
                    raise RuntimeError(f"fetching the P4Info failed: {out.stderr.strip()[-2000:]}")
                return text_format.Parse(out.stdout, pt.P4Info())
        except (RuntimeError, TimeoutError) as with_ports_failure:
            raise RuntimeError(f"without ports: {portless_failure}\n"
                               f"with two veth ports in a namespace: {with_ports_failure}") from None


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "fetch":
        sys.exit("usage: target.py fetch ADDR DEVICE_ID")
    print(text_format.MessageToString(fetch_p4info(sys.argv[2], int(sys.argv[3]))))
