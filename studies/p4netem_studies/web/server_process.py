"""What every server of the lab (nginx, Apache, the node SPDY server) does the same way: a private
working directory for its config and logs, one process in a namespace started from a config
written there, ready once its ports listen, a JSON-lines request log read back by tests and
labs, and stop() that ends the process and removes the directory (optionally keeping the logs).

A server says only what differs: how its config is written and checked (`prepare`), its command
line (`argv`), the ports it listens on and the name of its request log.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Self

from .netns import NsProcess, wait_listening


class ServerProcess:
    """One server in namespace `ns` (None: this one) until stop(); usable as a context manager."""

    prefix = "p4nw-server-"   # of the private working directory
    request_log_name = "access.log"
    kept_files: tuple[str, ...] = ("access.log",)   # what stop(keep_logs_in=DIR) copies

    def __init__(self, ns: str | None, workdir: str | Path | None = None):
        self.ns = ns
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=self.prefix))
        self.proc: NsProcess | None = None

    # ---- what a server says about itself -----------------------------------------------------------

    def prepare(self) -> None:
        """Write the config into workdir and check it (raise RuntimeError with the reason)."""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ports(self) -> list[int]:
        raise NotImplementedError

    # ---- shared -----------------------------------------------------------------------------------

    @property
    def request_log(self) -> Path:
        return self.workdir / self.request_log_name

    def start(self, timeout: float = 10.0) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.prepare()
        self.proc = NsProcess(self.ns, self.argv(), self.workdir / "stdout.log")
        try:
            wait_listening(self.ns, self.ports(), self.proc, timeout)
        except Exception:
            self.stop()
            raise
        return self

    def requests(self) -> list[dict]:
        """The request log so far, one dict per request."""
        if not self.request_log.exists():
            return []
        return [json.loads(line) for line in self.request_log.read_text().splitlines() if line]

    def stop(self, keep_logs_in: str | Path | None = None) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        if keep_logs_in is not None:
            dest = Path(keep_logs_in)
            dest.mkdir(parents=True, exist_ok=True)
            for name in self.kept_files:
                if (self.workdir / name).exists():
                    shutil.copy(self.workdir / name, dest / name)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
