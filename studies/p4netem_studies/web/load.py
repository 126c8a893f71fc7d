"""Load a page once and print its JSON report: the one entry point for every loader.

    python -m p4netem_studies.web.load --protocol h1.1-pipelined --manifest site/manifest.json \\
        --resolve www.microscape.test=10.0.0.2 [--scheme https --ca ca.pem] [--out report.json]

Protocols: h1.0, h1.1, h1.1-pipelined (Python, asyncio sockets), h2 (python-h2), spdy (node-spdy
agent, web/spdy-load.js), chromium (headless Chromium, web/chromium-load.js). Run it inside the
client's namespace; `run_loader` does that from Python (`ip netns exec NS ...`) and returns the
report as a dict. Names resolve from --resolve pairs and/or an /etc/hosts-style --hosts-file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from p4netem.stop_signals import communicate

from .manifest import Manifest
from .netns import ns_argv, parse_hosts
from .nodejs import node_argv
from .loaders.common import LoadOptions

PROTOCOLS = ("h1.0", "h1.1", "h1.1-pipelined", "h2", "spdy", "chromium")


def _node_report(script: str, payload: dict, timeout_s: float) -> dict:
    with tempfile.NamedTemporaryFile("w", prefix="p4nw-load-", suffix=".json", delete=False) as f:
        json.dump(payload, f)
        path = f.name
    try:
        proc = subprocess.Popen(node_argv(script, path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s + 30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise RuntimeError(f"{script} did not finish in {timeout_s + 30}s: {err[-2000:]}")
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise RuntimeError(f"{script} printed no report (exit {proc.returncode}): "
                               f"{err[-2000:]}") from None
    finally:
        os.unlink(path)


def load(protocol: str, manifest_path: str | Path, opts: LoadOptions, *,
         spki: list[str] | None = None, screenshot: str | None = None,
         browser_args: list[str] | None = None) -> dict:
    """Load the page in this process's namespace and return the report as a dict."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    manifest = Manifest.load(manifest_path)
    if protocol in ("h1.0", "h1.1", "h1.1-pipelined"):
        from .loaders.http1 import load_page
        return asyncio.run(load_page(manifest, opts, protocol)).to_json()
    if protocol == "h2":
        from .loaders.h2 import load_page as load_h2
        return asyncio.run(load_h2(manifest, opts)).to_json()
    if protocol == "spdy":
        payload = {k: v for k, v in asdict(opts).items()}
        payload.update(manifest=str(Path(manifest_path).resolve()), window=opts.h2_window)
        return _node_report("spdy-load.js", payload, opts.timeout_s)
    root = manifest.root
    default = 443 if opts.scheme == "https" else 80
    port = "" if opts.effective_port == default else f":{opts.effective_port}"
    payload = {"url": f"{opts.scheme}://{root.host}{port}{root.path}",
               "manifest": str(Path(manifest_path).resolve()), "resolve": opts.resolve,
               "spki": spki or [], "timeout_s": opts.timeout_s, "screenshot": screenshot,
               "extra_args": list(browser_args or [])}
    return _node_report("chromium-load.js", payload, opts.timeout_s)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m p4netem_studies.web.load", description=__doc__.split("\n")[0])
    p.add_argument("--protocol", required=True, choices=PROTOCOLS)
    p.add_argument("--manifest", required=True)
    p.add_argument("--resolve", action="append", default=[], metavar="HOST=IP")
    p.add_argument("--hosts-file", help="/etc/hosts-style file with the page's host names")
    p.add_argument("--dns", action="store_true",
                   help="look names missing from --resolve up with the system resolver")
    p.add_argument("--scheme", default="http", choices=("http", "https"))
    p.add_argument("--port", type=int)
    p.add_argument("--ca", help="CA certificate (PEM) the server certificate chains to")
    p.add_argument("--spki", action="append", default=[], help="Chromium: trusted key SPKI hash")
    p.add_argument("--conns-per-host", type=int)
    p.add_argument("--max-conns", type=int)
    p.add_argument("--discover", default="stream", choices=("stream", "after-html", "at-once"))
    p.add_argument("--revalidate", action="store_true", help="conditional GETs (expect 304)")
    p.add_argument("--accept-encoding", default="gzip, deflate")
    p.add_argument("--no-cookie", action="store_true")
    p.add_argument("--flush-bytes", type=int, default=1024)
    p.add_argument("--flush-ms", type=float, default=50.0)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--window-clamp", type=int, help="cap every connection's advertised TCP "
                   "window at this many bytes (TCP_WINDOW_CLAMP; Python loaders)")
    p.add_argument("--screenshot")
    p.add_argument("--browser-arg", action="append", default=[],
                   help="Chromium: extra command-line flag (e.g. --disable-http2)")
    p.add_argument("--out", help="write the report here instead of stdout")
    return p


def options_from_args(a: argparse.Namespace) -> LoadOptions:
    resolve: dict[str, str] = {}
    if a.hosts_file:
        resolve.update(parse_hosts(Path(a.hosts_file).read_text()))
    for pair in a.resolve:
        host, sep, ip = pair.partition("=")
        if not sep or not host or not ip:
            raise SystemExit(f"--resolve takes HOST=IP, not {pair!r}")
        resolve[host.lower()] = ip
    kwargs = dict(resolve=resolve, scheme=a.scheme, port=a.port, ca_file=a.ca,
                  conns_per_host=a.conns_per_host, max_conns=a.max_conns, discover=a.discover,
                  revalidate=a.revalidate, accept_encoding=a.accept_encoding,
                  flush_bytes=a.flush_bytes, flush_ms=a.flush_ms, timeout_s=a.timeout,
                  dns=a.dns, window_clamp=a.window_clamp)
    if a.no_cookie:
        kwargs["cookie"] = None
    return LoadOptions(**kwargs)


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        report = load(a.protocol, a.manifest, options_from_args(a), spki=a.spki,
                      screenshot=a.screenshot, browser_args=a.browser_arg)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"p4netem_studies.web.load: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(report)
    if a.out:
        Path(a.out).write_text(text + "\n")
    else:
        print(text)
    return 0 if report.get("ok") else 1


def run_loader(ns: str | None, protocol: str, manifest_path: str | Path, *,
               resolve: dict[str, str] | None = None, hosts_file: str | None = None,
               scheme: str = "http", port: int | None = None, ca_file: str | None = None,
               spki: list[str] | None = None, timeout_s: float = 60.0, dns: bool = False,
               extra_args: list[str] | None = None) -> dict:
    """Run one load inside namespace `ns` and return its report (ok or not)."""
    pkg_root = Path(__file__).resolve().parents[2]  # control-plane/
    argv = [sys.executable, "-m", "p4netem_studies.web.load", "--protocol", protocol,
            "--manifest", str(Path(manifest_path).resolve()), "--scheme", scheme,
            "--timeout", str(timeout_s)]
    for host, ip in (resolve or {}).items():
        argv += ["--resolve", f"{host}={ip}"]
    if hosts_file:
        argv += ["--hosts-file", hosts_file]
    if port:
        argv += ["--port", str(port)]
    if ca_file:
        argv += ["--ca", str(ca_file)]
    for s in spki or []:
        argv += ["--spki", s]
    if dns:
        argv.append("--dns")
    argv += extra_args or []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pkg_root), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(ns_argv(ns, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        # A load can take minutes: a SIGTERM Python dropped (p4netem.cli.signals) ends the wait
        # within a second (the lab's close ends the loader).
        out, err = communicate(proc, timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"{protocol} loader in {ns} did not finish in {timeout_s + 60}s")
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{protocol} loader in {ns} failed ({proc.returncode}): {err[-3000:]}")
    return json.loads(out)


if __name__ == "__main__":
    sys.exit(main())
