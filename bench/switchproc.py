"""Starts and stops the p4netem-switch process on the benchmark topology's root-namespace ends."""
from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from topo import Topo

ROOT = Path(__file__).resolve().parents[1]
SWITCH_BIN = ROOT / "dataplane" / "target" / "release" / "p4netem-switch"
DEVICE_ID = 1


@dataclass(frozen=True)
class Running:
    grpc_addr: str
    device_id: int
    cmd: tuple[str, ...]
    pid: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(t: Topo, seed: int = 1, binary: Path = SWITCH_BIN):
    if not binary.exists():
        raise FileNotFoundError(f"{binary} missing: run `cd dataplane && cargo build --release`")
    port = free_port()
    cmd = (str(binary), "-i", f"1@{t.ports[0]}", "-i", f"2@{t.ports[1]}",
           "--grpc-addr", f"127.0.0.1:{port}", "--device-id", str(DEVICE_ID), "--seed", str(seed))
    log = tempfile.NamedTemporaryFile(prefix="p4nb-switch-", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"p4netem-switch exited ({proc.returncode}): "
                                   f"{Path(log.name).read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("p4netem-switch did not open its gRPC port in 20 s")
                time.sleep(0.1)
        yield Running(f"127.0.0.1:{port}", DEVICE_ID, cmd, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        Path(log.name).unlink(missing_ok=True)
