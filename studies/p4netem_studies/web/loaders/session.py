"""The protocol-independent half of a page load: which objects are wanted, when, and whether the
page is complete. Protocol loaders subclass `PageLoad` and implement `submit` and `close`."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from dataclasses import asdict

from ..manifest import Entry, Manifest
from .common import Discovery, LoadOptions, LoadReport, ObjectResult, now_ms


class PageLoad:
    loader = "base"
    protocol = "?"

    def __init__(self, manifest: Manifest, opts: LoadOptions):
        self.manifest = manifest
        self.opts = opts
        self.t0 = time.perf_counter()
        self.results: dict[tuple[str, str], ObjectResult] = {
            (e.host, e.path): ObjectResult(e.url, e.host, e.path, e.type, e.size)
            for e in manifest.objects}
        self._requested: set[tuple[str, str]] = set()
        self._outstanding = len(manifest.objects)
        self._done = asyncio.Event()
        self._discovery: Discovery | None = None
        self._html_source: object = None
        self._found: list[Entry] = []
        self._lookups: dict[str, asyncio.Task] = {}
        opt_dict = asdict(opts)
        opt_dict.pop("cookie", None)
        self.report = LoadReport(self.loader, self.protocol, manifest.page, opt_dict, time.time())

    # --- to implement ---------------------------------------------------------------------------

    def submit(self, entry: Entry, urgent: bool) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    # --- shared -----------------------------------------------------------------------------------

    def ms(self) -> float:
        return now_ms(self.t0)

    def result(self, entry: Entry) -> ObjectResult:
        return self.results[(entry.host, entry.path)]

    def want(self, entry: Entry, *, urgent: bool = False, discovered: bool = True) -> None:
        key = (entry.host, entry.path)
        if key in self._requested:
            return
        self._requested.add(key)
        res = self.results[key]
        res.t_queued = self.ms()
        res.discovered = discovered
        self.submit(entry, urgent)

    def html_data(self, source: object, new: bytes, content_encoding: str | None) -> None:
        """Feed HTML body bytes as received on the wire (still content-encoded).

        `source` names the response carrying them (a connection or stream); bytes from a new source
        (the HTML re-requested after a dropped connection) restart the scan. In "stream" mode newly
        referenced objects are requested at once; otherwise they wait for html_complete.
        """
        if source is not self._html_source or self._discovery is None:
            self._discovery = Discovery(self.manifest, content_encoding)
            self._html_source = source
        if not new:
            return
        try:
            found = self._discovery.feed(new)
        except Exception as exc:  # undecodable HTML: html_complete still fetches every object
            self.report.errors.append(f"HTML discovery failed: {exc}")
            return
        for entry in found:
            if self.opts.discover == "stream":
                self.want(entry)
            else:
                self._found.append(entry)

    def html_complete(self) -> None:
        """The whole HTML is in: request what it referenced, then anything it did not."""
        for entry in self._found:
            self.want(entry)
        if self._discovery is not None:
            self.report.unknown_references = self._discovery.unknown
        for entry in self.manifest.embedded:
            self.want(entry, discovered=False)

    def complete(self, entry: Entry, status: int | None, body: bytes | None,
                 error: str | None = None) -> None:
        """Object done: `body` is the decoded body (None when there is none or on error)."""
        res = self.result(entry)
        if res.t_done is not None:
            return
        res.t_done = self.ms()
        res.status = status
        if error:
            res.error = error
        elif body is not None:
            res.size = len(body)
        if not error:
            res.check(entry, body, self.opts.revalidate)
        if entry is self.manifest.root:
            # Loaders have fed the HTML through html_data; without it (an error) nothing else
            # would be requested, so html_complete fetches the rest anyway.
            self.html_complete()
        self._outstanding -= 1
        if self._outstanding == 0:
            self._done.set()

    async def lookup(self, host: str) -> str:
        """The address of `host` from the system resolver (resolv.conf of the namespace), once
        per load and host; the time it took goes into the report's `dns`."""
        host = host.lower()
        if host not in self._lookups:
            self._lookups[host] = asyncio.get_running_loop().create_task(self._lookup(host))
        return await self._lookups[host]

    async def _lookup(self, host: str) -> str:
        rec = {"t_start": self.ms(), "t_done": None, "address": None}
        self.report.dns[host] = rec
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, self.opts.effective_port, family=socket.AF_INET, type=socket.SOCK_STREAM)
        rec["t_done"] = self.ms()
        rec["address"] = infos[0][4][0]
        return rec["address"]

    def ssl_context(self, alpn: list[str]) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.opts.ca_file)
        ctx.set_alpn_protocols(alpn)
        # Cold cache, new connections (E3/E5): no session resumption across connections.
        ctx.options |= ssl.OP_NO_TICKET
        return ctx

    async def run(self) -> LoadReport:
        try:
            self.want(self.manifest.root, urgent=True)
            if self.opts.discover == "at-once":
                for entry in self.manifest.embedded:
                    self.want(entry)
            try:
                await asyncio.wait_for(self._done.wait(), self.opts.timeout_s)
            except asyncio.TimeoutError:
                self.report.errors.append(f"page not complete after {self.opts.timeout_s}s")
        finally:
            await self.close()
        key_order = [(e.host, e.path) for e in self.manifest.objects]
        self.report.objects = [self.results[k] for k in key_order]
        return self.report.finish()
