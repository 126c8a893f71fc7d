"""SPDY header blocks are compressed inline, as the studies' SPDY stacks did (issue 16).

node-spdy (spdy-transport) deflated and inflated every header block through node's
asynchronous zlib streams: a trip through libuv's thread pool and back per block, one block at a
time per session, which on this busy 2-core machine held responses for milliseconds
(docs/labs.md). web/spdy-inline-zlib.js codes the same zlib contexts synchronously. Checked
here: the bytes are those of node-spdy's own path, the callback comes before write() returns, and
the real server answers a page load, plain and over TLS, without ever starting the thread pool
(with node-spdy's own path, P4NETEM_SPDY_HEADER_ZLIB=async, the same load starts it: the check
can fail).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from p4netem_studies.web.load import run_loader
from p4netem_studies.web.nodejs import node_argv, web_dir
from p4netem_studies.web.spdy_server import SpdyConfig, SpdyServer

from web_env import CLIENT_NS, SERVER_NS

# Same comparison in one node process: a session's header blocks (request-like and
# response-like, the first large enough to fill zlib's output buffer more than once) through
# spdy-transport's own zlib pair and LockStream, and through InlineCoder on a fresh pair.
SCRIPT = r"""
const path = require('path');
const web = process.argv[process.argv.length - 1];
const transport = require(path.join(web, 'node_modules', 'spdy-transport'));
const { InlineCoder } = require(path.join(web, 'spdy-inline-zlib.js'));
const crypto = require('crypto');
const pool = () => transport.protocol.spdy.compressionPool.create(true).get('3.1');
const blocks = [crypto.randomBytes(200000),
  Buffer.from(':method GET :path /index.html :host www.site1.test user-agent Mozilla/5.0'),
  Buffer.from(':status 200 content-type text/html content-length 2048 last-modified x'),
  Buffer.from(':method GET :path /o1.gif :host www.site1.test user-agent Mozilla/5.0'),
  Buffer.from('')];
const viaAsync = (coder, list, done, out = []) => {
  if (list.length === 0) return done(out);
  coder.write([list[0]], (err, chunks) => {
    if (err) throw err;
    out.push(Buffer.concat(chunks));
    viaAsync(coder, list.slice(1), done, out);
  });
};
const a = pool();
viaAsync(new transport.utils.LockStream(a.compress), blocks, (want) => {
  const b = pool();
  const deflate = new InlineCoder(b.compress);
  const inflate = new InlineCoder(b.decompress);
  const got = [];
  const back = [];
  let sync = true;
  for (const block of blocks) {
    let called = false;
    deflate.write([block], (err, chunks) => { if (err) throw err; called = true; got.push(Buffer.concat(chunks)); });
    sync = sync && called;
    inflate.write([got[got.length - 1]], (err, chunks) => { if (err) throw err; back.push(Buffer.concat(chunks)); });
  }
  // node-spdy's own inflate reads what the inline deflate wrote.
  viaAsync(new transport.utils.LockStream(pool().decompress), got, (theirs) => {
    let bad = null;
    try { new InlineCoder(pool().decompress).write([Buffer.from('not zlib at all')], (err) => { bad = err ? String(err.message || err) : null; }); }
    catch (err) { bad = 'threw: ' + err.message; }
    process.stdout.write(JSON.stringify({
      sync,
      same_bytes: want.map((w, i) => w.equals(got[i])),
      inline_inflate: back.map((x, i) => x.equals(blocks[i])),
      async_inflate: theirs.map((x, i) => x.equals(blocks[i])),
      bad,
    }));
  });
});
"""


def test_inline_header_blocks_are_node_spdys_bytes_coded_synchronously(tmp_path: Path):
    script = tmp_path / "check.js"
    script.write_text(SCRIPT)
    argv = node_argv("spdy-inline-zlib.js")[:-1] + [str(script), str(web_dir())]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    r = json.loads(out.stdout)
    assert r["sync"], "the callback must run before write() returns"
    assert r["same_bytes"] == [True] * 5, r
    assert r["inline_inflate"] == [True] * 5, r
    assert r["async_inflate"] == [True] * 5, r
    assert r["bad"] and not r["bad"].startswith("threw"), "a corrupt block is an error to the callback"


def _threads(pid: int) -> set[int]:
    return {int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()}


def _wait_threads_settle(pid: int) -> set[int]:
    """Node starts its own helper threads at startup; wait until the set stops changing."""
    seen = _threads(pid)
    for _ in range(20):
        time.sleep(0.1)
        now = _threads(pid)
        if now == seen:
            return now
        seen = now
    return seen


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("header_zlib", ["inline", "async"])
def test_spdy_server_answers_without_the_thread_pool(webnet, content, tmp_path, monkeypatch,
                                                     tls, header_zlib):
    if header_zlib == "async":
        monkeypatch.setenv("P4NETEM_SPDY_HEADER_ZLIB", "async")
    else:
        monkeypatch.delenv("P4NETEM_SPDY_HEADER_ZLIB", raising=False)
    port = 9443 if tls else 9081
    # No warm-up: it would start the pool before the count (async) or hide nothing (inline);
    # this checks what a load does.
    srv = SpdyServer(SERVER_NS, SpdyConfig(content.root, port=port, tls=tls, warmup_sessions=0),
                     content.cert if tls else None, workdir=tmp_path / "srv")
    srv.start()
    try:
        pid = srv.proc.pid
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "node"
        before = _wait_threads_settle(pid)
        m = content.demo
        report = run_loader(CLIENT_NS, "spdy", content.demo_path, resolve=content.resolve(m),
                            scheme="https" if tls else "http", port=port,
                            ca_file=str(content.cert.ca_cert), timeout_s=30)
        assert report["ok"], report["errors"]
        assert len(srv.requests()) >= len(m.objects) - 2  # the log's last lines may lag
        started = _threads(pid) - before
    finally:
        srv.stop()
    if header_zlib == "inline":
        # libuv starts its pool (4 threads) on the first job sent to it: none was.
        assert not started, f"{len(started)} threads started while serving {len(m.objects)} objects"
    else:
        assert len(started) >= 4, "node-spdy's own path goes through libuv's thread pool"


def test_the_warm_up_runs_before_listening_and_leaves_no_trace(webnet, content, tmp_path):
    """The server answers its warm-up sessions over loopback before it listens; the measured
    load then finds an empty request log and connection numbers from 1, as a cold server would
    give it."""
    srv = SpdyServer(SERVER_NS, SpdyConfig(content.root, port=9082, tls=False),
                     workdir=tmp_path / "srv")
    srv.start()
    try:
        warm = srv.warmup()
        assert warm is not None, "the server said nothing about its warm-up"
        # Every session it started was answered whole (a busy machine may stop it early).
        assert 1 <= warm["sessions"] <= SpdyConfig.warmup_sessions
        assert warm["requests"] == 7 * warm["sessions"], warm
        assert srv.requests() == []
        m = content.demo
        report = run_loader(CLIENT_NS, "spdy", content.demo_path, resolve=content.resolve(m),
                            scheme="http", port=9082, timeout_s=30)
        assert report["ok"], report["errors"]
        deadline = time.monotonic() + 3
        while len(srv.requests()) < len(m.objects) and time.monotonic() < deadline:
            time.sleep(0.05)
        rows = srv.requests()
    finally:
        srv.stop()
    assert len(rows) == len(m.objects)
    assert {r["host"] for r in rows} == set(m.hosts)
    assert sorted({r["conn"] for r in rows}) == list(range(1, len(m.hosts) + 1))
