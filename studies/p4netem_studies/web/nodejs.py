"""Where the Node side of the labs lives (`web/` at the repo top) and how to run its scripts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def web_dir() -> Path:
    """`web/` of the repository, or $P4NETEM_WEB_DIR when the package is installed elsewhere."""
    env = os.environ.get("P4NETEM_WEB_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "web"


def node_argv(script: str, *args: str) -> list[str]:
    d = web_dir()
    if not (d / script).exists():
        raise FileNotFoundError(f"{d / script} not found (set P4NETEM_WEB_DIR to the repo's web/)")
    if not (d / "node_modules").is_dir():
        raise RuntimeError(f"{d}/node_modules is missing: run scripts/setup-web.sh (npm ci)")
    node = shutil.which("node") or "/usr/bin/node"
    # node-spdy touches process.binding('http_parser'); the deprecation note is noise in logs.
    # --pending-deprecation: node-spdy's buffers (wbuf, http-deceiver) are made with the
    # deprecated Buffer(), and for each such call from node_modules node walks the JS stack to
    # decide whether to warn (isInsideNodeModules), up to 10 000 calls a process: 5 a response,
    # 6-8 % of the SPDY server's CPU in a perf profile. With the flag the first call takes the
    # warning (silenced by --no-deprecation) and the rest return at once.
    return [node, "--no-deprecation", "--pending-deprecation", str(d / script), *args]
