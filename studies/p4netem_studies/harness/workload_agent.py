"""The process of the workload generator that runs in one client namespace: many scripted web
clients and bulk clients at once, on one asyncio loop (p4netem_studies.harness.workload starts one per
client host and reads what it writes).

    python -m p4netem_studies.harness.workload_agent CONFIG.json

Web client (E2's model): waits a random part of a think time, then loops until the measured
window ends: picks a server and a page (1 primary + embedded objects drawn from the server's
object pool), loads it with the harness's HTTP/1.x loader, thinks for U(think_lo, think_hi) s.
  - HTTP/1.0: a new connection per object; the embedded objects' connections open at once when
    the primary has arrived (the loader's h1.0 mode with as many connections as embedded objects);
  - HTTP/1.1: one persistent connection per page; the embedded requests are pipelined behind the
    primary's response ("pipelined", each request flushed at once) or sent one at a time
    ("serial").
Bulk client: fetches the 1 MB file again and again (HTTP/1.0, a new connection each time) and
counts the bytes it receives in 100 ms bins, so goodput in the window is exact.
Every socket's advertised window is capped (TCP_WINDOW_CLAMP) when the config says so.

Output (JSON, written at the end): every page (client, server, start, delay, bytes, ok, error),
the bulk bins, and the agent's own start/end times on the wall clock.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import sys
import time
from pathlib import Path

from ..web.loaders.common import LoadOptions
from ..web.loaders.http1 import H1PageLoad
from ..web.manifest import Entry, Manifest

BIN_S = 0.1
POOL_HOST = "pool.workload.test"


def _entry(obj: dict, primary: bool) -> Entry:
    return Entry(f"//{POOL_HOST}{obj['path']}", POOL_HOST, obj["path"], obj["size"],
                 "html" if primary else "image", "application/octet-stream", obj["sha256"])


class Agent:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.rng = random.Random(cfg["seed"])
        self.pool = cfg["pool"]
        self.servers = cfg["servers"]
        self.start = cfg["start_at"]                   # wall clock: the run starts
        self.stop_new = self.start + cfg["warmup_s"] + cfg["duration_s"]
        self.hard_stop = self.stop_new + cfg["grace_s"]
        self.pages: list[dict] = []
        self.bulk_bins: dict[int, int] = {}
        self.bulk_files = 0
        self.errors: list[str] = []

    # ---- web clients -------------------------------------------------------------------------
    def _options(self, server: str) -> tuple[LoadOptions, str]:
        cfg = self.cfg
        n_embedded = cfg["objects_per_page"] - 1
        if cfg["http"] == "1.0":
            mode, conns = "h1.0", max(1, n_embedded)
        elif cfg["http11"] == "pipelined":
            mode, conns = "h1.1-pipelined", 1
        else:
            mode, conns = "h1.1", 1
        opts = LoadOptions(resolve={POOL_HOST: server}, scheme="http", port=80,
                           conns_per_host=conns, timeout_s=cfg["page_timeout_s"],
                           window_clamp=cfg["window_clamp"],
                           # Pipelined requests go out at once: the 1998 model had no flush timer.
                           flush_bytes=1, flush_ms=0.0, accept_encoding="identity")
        return opts, mode

    async def web_client(self, cid: int) -> None:
        rng = random.Random(f"{self.cfg['seed']}/web/{cid}")
        lo, hi = self.cfg["think_s"]
        await self._sleep_until(self.start + rng.uniform(0, hi))
        n = 0
        while time.time() < self.stop_new:
            server = rng.choice(self.servers)
            objs = [rng.choice(self.pool) for _ in range(self.cfg["objects_per_page"])]
            # One page must not name one object twice (the loader keys objects by path).
            seen: set[str] = set()
            entries = []
            for i, o in enumerate(objs):
                while o["path"] in seen:
                    o = rng.choice(self.pool)
                seen.add(o["path"])
                entries.append(_entry(o, i == 0))
            manifest = Manifest(f"c{cid}p{n}", "workload page", 0, self.cfg["last_modified"],
                                (POOL_HOST,), tuple(entries))
            opts, mode = self._options(server)
            t_start = time.time()
            # Recorded before it runs: a page still loading when the agent stops stays in the
            # output as unfinished (ok None) instead of silently vanishing.
            rec = {"client": cid, "server": server, "page": n, "t_start": t_start,
                   "objects": len(entries), "bytes": sum(e.size for e in entries), "ok": None,
                   "delay_ms": None, "t_end": None, "connections": None, "error": "unfinished"}
            self.pages.append(rec)
            try:
                report = await H1PageLoad(manifest, opts, mode).run()
                rec.update(ok=report.ok, delay_ms=report.elapsed_ms,
                           t_end=t_start + (report.elapsed_ms or 0) / 1000.0,
                           connections=len(report.connections),
                           error=report.errors[0][:300] if report.errors else None)
            except Exception as exc:  # noqa: BLE001 - one page failing must not end the run
                rec.update(ok=False, delay_ms=None, t_end=time.time(), connections=None,
                           error=f"{type(exc).__name__}: {exc}"[:300])
            n += 1
            # Think; a client whose think time runs past the window has nothing left to do.
            await asyncio.sleep(min(rng.uniform(lo, hi), max(0.0, self.stop_new - time.time())))

    # ---- bulk clients ------------------------------------------------------------------------
    async def bulk_client(self, bid: int) -> None:
        rng = random.Random(f"{self.cfg['seed']}/bulk/{bid}")
        await self._sleep_until(self.start + rng.uniform(0, 1.0))
        while time.time() < self.stop_new:
            server = rng.choice(self.servers)
            try:
                await self._fetch_bulk(server)
                self.bulk_files += 1
            except (OSError, asyncio.TimeoutError) as exc:
                self.errors.append(f"bulk {bid}: {type(exc).__name__}: {exc}"[:300])
                await asyncio.sleep(0.5)

    async def _fetch_bulk(self, server: str) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.cfg["window_clamp"]:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, self.cfg["window_clamp"])
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.sock_connect(sock, (server, 80)), 30)
            req = (f"GET {self.cfg['bulk_path']} HTTP/1.0\r\nHost: {POOL_HOST}\r\n"
                   "User-Agent: p4netem-workload/1\r\nAccept: */*\r\n\r\n").encode()
            await loop.sock_sendall(sock, req)
            header_done = False
            buf = b""
            while time.time() < self.hard_stop:
                data = await asyncio.wait_for(loop.sock_recv(sock, 65536), 60)
                if not data:
                    break
                if not header_done:
                    buf += data
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        continue
                    header_done = True
                    data = buf[end + 4:]
                b = int((time.time() - self.start) / BIN_S)
                self.bulk_bins[b] = self.bulk_bins.get(b, 0) + len(data)
                if time.time() >= self.stop_new:
                    break
        finally:
            sock.close()

    # ---- run ---------------------------------------------------------------------------------
    async def _sleep_until(self, t: float) -> None:
        delay = t - time.time()
        if delay > 0:
            await asyncio.sleep(delay)

    async def run(self) -> dict:
        tasks = [asyncio.create_task(self.web_client(c)) for c in self.cfg["web_clients"]]
        tasks += [asyncio.create_task(self.bulk_client(b)) for b in self.cfg["bulk_clients"]]
        # Pages in flight when the window ends may finish during the grace period; then stop.
        done, pending = await asyncio.wait(tasks, timeout=max(0.0, self.hard_stop - time.time()))
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for t in done:
            if t.exception() is not None:
                self.errors.append(f"{type(t.exception()).__name__}: {t.exception()}"[:300])
        return {"pages": self.pages, "bulk_bins": {str(k): v for k, v in self.bulk_bins.items()},
                "bulk_bin_s": BIN_S, "bulk_files": self.bulk_files, "errors": self.errors,
                "unfinished_tasks": len(pending)}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m p4netem_studies.harness.workload_agent CONFIG.json", file=sys.stderr)
        return 2
    cfg = json.loads(Path(args[0]).read_text())
    t0 = time.time()
    result = asyncio.run(Agent(cfg).run())
    result.update(agent_started=t0, agent_ended=time.time(), host=cfg.get("host"))
    Path(cfg["out"]).write_text(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
