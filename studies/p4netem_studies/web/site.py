"""Write a page model out as real files, one directory per host name, plus its manifest.

Layout: `<root>/<host>/index.html`, `<root>/<host>/img/0001.gif`, ... and `<root>/manifest.json`.
Servers serve `<root>/<Host header>/<path>`, so one server can carry any subset of the page's hosts.
Every file gets the same fixed modification time, so Last-Modified and ETag are the same on every
run and a revalidation run (E1) gets 304s.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import random
from pathlib import Path

from . import payloads
from .manifest import Entry, Manifest
from .pages import KINDS, PageModel

# 2020-01-01T00:00:00Z: any fixed past instant works; it only has to be the same on every run.
FIXED_MTIME = 1577836800


def _url(host: str, path: str, scheme: str | None, port: int | None) -> str:
    authority = host if port is None else f"{host}:{port}"
    # Protocol-relative URLs let one tree serve http and https pages alike.
    return f"{scheme}://{authority}{path}" if scheme else f"//{authority}{path}"


def _reference(kind: str, url: str, rng: random.Random) -> str:
    if kind in ("gif", "png"):
        w, h = rng.randint(16, 400), rng.randint(16, 300)
        return f'<img src="{url}" width="{w}" height="{h}" alt="">'
    if kind == "js":
        return f'<script src="{url}"></script>'
    return f'<link rel="stylesheet" href="{url}">'


def _body(kind: str, size: int, rng: random.Random) -> bytes:
    if kind == "gif":
        return payloads.gif(size, rng)
    if kind == "png":
        return payloads.png(size, rng)
    if kind == "js":
        return payloads.script(size, rng)
    return payloads.stylesheet(size, rng)


def generate(page: PageModel, root: str | Path, seed: int = 1, scheme: str | None = None,
             port: int | None = None, manifest_name: str = "manifest.json") -> Manifest:
    """Write `page` under `root` and return (and save) its manifest.

    `scheme`/`port` fix the URLs written into the HTML; by default they are protocol-relative on the
    default port, which suits nginx on 80/443 and Chromium. Loaders take their own scheme and port
    and use only host and path from the manifest.
    """
    root = Path(root)
    rng = random.Random(f"{page.name}/{seed}")
    entries: list[Entry] = []
    refs: list[str] = []
    files: list[tuple[Path, bytes]] = []
    for i, obj in enumerate(page.objects, start=1):
        directory, ext, ctype, mtype = KINDS[obj.kind]
        path = f"/{directory}/{i:04d}.{ext}"
        data = _body(obj.kind, obj.size, rng)
        url = _url(obj.host, path, scheme, port)
        refs.append(_reference(obj.kind, url, rng))
        entries.append(Entry(url, obj.host, path, len(data), mtype, ctype,
                             hashlib.sha256(data).hexdigest()))
        files.append((root / obj.host / path.lstrip("/"), data))
    html = payloads.html(page.html_size, page.name, refs, rng)
    html_path = "/index.html"
    files.insert(0, (root / page.html_host / "index.html", html))
    entries.insert(0, Entry(_url(page.html_host, html_path, scheme, port), page.html_host, html_path,
                            len(html), "html", "text/html", hashlib.sha256(html).hexdigest()))
    for path, data in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))
    manifest = Manifest(page.name, page.description, seed,
                        email.utils.formatdate(FIXED_MTIME, usegmt=True), page.hosts, tuple(entries))
    # Pages with different host names can share one root (one server); give each its manifest.
    manifest.save(root / manifest_name)
    return manifest
