'use strict';
// SPDY/3.1 static file server for the p4netem web labs (node-spdy 4.0.2).
//
// Usage: node spdy-server.js CONFIG.json
//   { "root": DIR, "port": N, "address": "0.0.0.0", "tls": {"cert": PEM, "key": PEM} | null,
//     "log": FILE, "protocols": ["spdy/3.1", "http/1.1"], "nodelay": true }
// Serves ROOT/<Host header>/<path>, the same tree nginx serves, with Last-Modified and 304s.
// With TLS the protocol is chosen by ALPN (Node has no NPN any more); without TLS every
// connection is a spdy/3.1 session.
// Prints "listening PORT" once bound; logs one JSON line per request to LOG.

const fs = require('fs');
const https = require('https');
const net = require('net');
const path = require('path');
const spdy = require('spdy');
const inlineZlib = require('./spdy-inline-zlib');

const MIME = {
  '.html': 'text/html', '.gif': 'image/gif', '.png': 'image/png',
  '.js': 'application/javascript', '.css': 'text/css',
};

function headersOf(file, size, lastModified) {
  return {
    'content-type': MIME[path.extname(file)] || 'application/octet-stream',
    'content-length': size, 'last-modified': lastModified,
  };
}

// Every write a turn of the event loop makes leaves in one writev (under TLS one record), not
// one send() each. node-spdy writes each frame, and a SYN_REPLY's head and header block, with
// separate write() calls; with Nagle off (as it must be, below) each became a packet of its own,
// 4 per small response, so a few responses used up a 10-segment initial congestion window
// (it counts packets, not bytes) and the next response waited a round trip for an ACK, seen in
// captures of plain SPDY loads on lte-200ms (docs/labs.md). nginx writes an HTTP/2 burst
// with one writev per output queue; this gives node-spdy the same.
function coalesceWrites(socket) {
  const write = socket.write;
  socket.write = function coalesced(...args) {
    if (!this.writableCorked) {
      this.cork();
      setImmediate(() => this.uncork());
    }
    return write.apply(this, args);
  };
}

// node-spdy's plain agent, used only to warm the server up (below): its plain mode wraps
// streams in net.Sockets that Node 20 aborts, so the TLS-flavoured agent runs over plain TCP,
// as in web/spdy-load.js.
class PlainSpdyAgent extends spdy.Agent {
  createConnection(options) {
    const socket = net.connect(options);
    socket.once('connect', () => socket.emit('secureConnect'));
    return socket;
  }
}

// The studies' SPDY servers (mod_spdy, nginx's spdy module) were compiled code, as fast on their
// first request as on their thousandth. Node compiles node-spdy's JavaScript on first calls
// and optimizes it only after many: a fresh server spent several ms of CPU per request for its
// first few dozen requests (docs/labs.md), and a lab server answers only a few dozen in a whole
// run, so every measured response paid the JIT's warm-up. So before it listens, the server
// answers `sessions` page-like SPDY sessions (a request, then 6 at once) from its own agent
// over loopback, through the same session code and handler (bodies from memory; not logged).
function warmUp(spdyServer, sessions, whenDone) {
  let finished = false;
  let served = 0;
  const t0 = process.hrtime.bigint();
  const done = () => {
    if (finished) return;
    finished = true;
    whenDone({ sessions: sessions - left, requests: served,
      ms: Math.round(Number(process.hrtime.bigint() - t0) / 1e6) });
  };
  let left = sessions;
  if (!sessions) { done(); return; }
  const lookup = (name, lopts, cb) => (lopts && lopts.all
    ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4));
  const tcp = net.createServer((socket) => {
    socket.setNoDelay(true);
    coalesceWrites(socket);
    spdyServer._handleConnection(socket, 'spdy/3.1');
  });
  tcp.on('error', () => done());
  tcp.listen(0, '127.0.0.1', () => {
    const port = tcp.address().port;
    const headers = { host: WARM_HOST, 'user-agent': 'Mozilla/5.0 p4netem-warmup/1', accept: '*/*',
      'accept-encoding': 'gzip, deflate', 'accept-language': 'en-US,en;q=0.9' };
    const fetch = (agent, p, then) => {
      const req = https.request({ agent, host: WARM_HOST, port, path: p, method: 'GET', headers });
      req.on('response', (res) => { res.on('data', () => {}); res.on('end', () => { served += 1; then(); }); });
      req.on('error', then);
      req.end();
    };
    const session = () => {
      if (finished) return;
      // On a very busy machine the warm-up stops at its time budget: the server must start.
      const spent = Number(process.hrtime.bigint() - t0) / 1e6;
      if (left === 0 || spent > WARM_BUDGET_MS) { tcp.close(); done(); return; }
      left -= 1;
      const agent = new PlainSpdyAgent({ host: WARM_HOST, port, lookup,
        spdy: { protocols: ['spdy/3.1'], protocol: 'spdy/3.1' } });
      // A warm-up that fails only leaves the server colder: it listens all the same.
      agent.on('error', () => { tcp.close(); done(); });
      agent._spdyState.socket.setNoDelay(true);
      fetch(agent, '/index.html', () => {
        let n = 6;
        for (let i = 1; i <= 6; i += 1) {
          fetch(agent, `/o${i}.gif`, () => {
            n -= 1;
            if (n === 0) { agent.close(() => {}); setImmediate(session); }
          });
        }
      });
    };
    session();
  });
}

const WARM_HOST = 'warmup.invalid';
const DEFAULT_WARMUP = 10;
const WARM_BUDGET_MS = 3000;
const WARM_FILE = { data: Buffer.alloc(2048, 120), lastModified: new Date(0).toUTCString() };

function main() {
  const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  // Header blocks deflated and inflated inline as the studies' SPDY servers did, not through
  // libuv's thread pool (web/spdy-inline-zlib.js); P4NETEM_SPDY_HEADER_ZLIB=async puts
  // node-spdy's own path back, for A/B measurements (docs/labs.md).
  if (process.env.P4NETEM_SPDY_HEADER_ZLIB !== 'async') inlineZlib.install();
  const root = path.resolve(cfg.root);
  const log = fs.openSync(cfg.log || '/dev/null', 'a');
  const plain = !cfg.tls;
  const protocols = cfg.protocols || ['spdy/3.1', 'http/1.1'];
  const connIds = new WeakMap();
  let nextConn = 1;
  const connCounts = new Map();
  let warming = true;

  function connectionOf(req) {
    // One id per TCP connection: the SPDY session object, or the socket for HTTP/1.x.
    const key = (req.spdyStream && req.spdyStream.connection) || req.socket;
    if (!connIds.has(key)) connIds.set(key, nextConn++);
    return connIds.get(key);
  }

  const files = new Map();
  function fileOf(file) {
    if (!files.has(file)) {
      let entry = null;
      try {
        const st = fs.statSync(file);
        if (st.isFile()) {
          entry = { data: fs.readFileSync(file), lastModified: st.mtime.toUTCString() };
        }
      } catch (err) { entry = null; }
      if (entry) files.set(file, entry);
      return entry;
    }
    return files.get(file);
  }

  function handler(req, res) {
    const t0 = process.hrtime.bigint();
    const conn = connectionOf(req);
    const connReq = (connCounts.get(conn) || 0) + 1;
    connCounts.set(conn, connReq);
    const host = String(req.headers.host || '').replace(/:\d+$/, '').toLowerCase();
    const urlPath = decodeURIComponent(String(req.url).split('?')[0]);
    const file = path.resolve(root, host, '.' + urlPath);
    const done = (status, bytes) => {
      if (warming) return;
      fs.writeSync(log, JSON.stringify({
        msec: Date.now() / 1000, conn, conn_req: connReq, spdy: !!req.isSpdy,
        version: req.isSpdy ? String(req.spdyVersion) : req.httpVersion,
        alpn: (req.socket && req.socket.alpnProtocol) || null,
        stream: req.spdyStream ? req.spdyStream.id : null, host, uri: req.url, status,
        body_bytes: bytes, request_time: Number(process.hrtime.bigint() - t0) / 1e9,
      }) + '\n');
    };
    if (!warming && (!host || !file.startsWith(root + path.sep + host + path.sep))) {
      res.writeHead(400, {'content-length': 0}); res.end(); done(400, 0); return;
    }
    // Files are read synchronously and kept: the content is small, static for the server's
    // life and in the page cache, and each asynchronous hop (stat, then read, through libuv's
    // thread pool) cost tens of ms of a response on a busy 2-core machine (the RTT audit's
    // server_ms), time nginx does not spend.
    const f = warming ? WARM_FILE : fileOf(file);
    if (!f) {
      res.writeHead(404, {'content-length': 0}); res.end(); done(404, 0); return;
    }
    const ims = req.headers['if-modified-since'];
    if (ims && ims === f.lastModified) {
      res.writeHead(304, {'last-modified': f.lastModified}); res.end(); done(304, 0); return;
    }
    res.writeHead(200, headersOf(file, f.data.length, f.lastModified));
    if (req.method === 'HEAD') { res.end(); done(200, 0); return; }
    // end(buffer), not a piped stream: piping a file stream into a node-spdy response makes
    // Node 20 reset the stream after the last DATA frame. The head and the body are written in
    // the same turn of the event loop, so they leave in one write (coalesceWrites).
    res.end(f.data);
    done(200, f.data.length);
  }

  const opts = {
    spdy: { protocols, plain: false, ssl: true, connection: { autoSpdy31: true } },
  };
  if (!plain) {
    opts.cert = fs.readFileSync(cfg.tls.cert);
    opts.key = fs.readFileSync(cfg.tls.key);
    if (cfg.tls.minVersion) opts.minVersion = cfg.tls.minVersion;
  }
  // Always build node-spdy's TLS-flavoured server: its plain mode wraps streams in net.Sockets
  // that Node 20 aborts (RST_STREAM CANCEL) after the last DATA frame. For plain SPDY a net.Server
  // hands each TCP connection straight to it as a spdy/3.1 session (the port speaks only SPDY).
  const spdyServer = spdy.createServer(opts, handler);
  spdyServer.on('clientError', () => {});
  // Nagle off on every accepted connection, as nginx's tcp_nodelay (on by default) has it for the
  // HTTP/1.1 and HTTP/2 endpoints: otherwise a response's last short frame waits for the client's
  // delayed ACK (40 ms), a penalty of this server and not of SPDY.
  spdyServer.on('secureConnection', (socket) => coalesceWrites(socket));
  spdyServer.on('connection', (socket) => socket.setNoDelay(true));
  let server = spdyServer;
  if (plain) {
    server = net.createServer((socket) => {
      socket.setNoDelay(true);
      coalesceWrites(socket);
      spdyServer._handleConnection(socket, 'spdy/3.1');
      // "nodelay": false puts Nagle back (node-spdy set NODELAY above): a stall on purpose, for
      // the RTT audit's tests.
      if (cfg.nodelay === false) socket.setNoDelay(false);
    });
  }
  // P4NETEM_SPDY_SERVER_WARMUP=N overrides the count, for A/B measurements (docs/labs.md).
  const env = process.env.P4NETEM_SPDY_SERVER_WARMUP;
  const sessions = env !== undefined && env !== '' ? Number(env)
    : (cfg.warmup_sessions === undefined ? DEFAULT_WARMUP : cfg.warmup_sessions);
  warmUp(spdyServer, sessions, (warm) => {
    warming = false;
    process.stdout.write(`warmed up: ${warm.sessions} sessions, ${warm.requests} requests in ${warm.ms} ms\n`);
    nextConn = 1;
    connCounts.clear();
    server.listen(cfg.port, cfg.address || '0.0.0.0', () => {
      process.stdout.write(`listening ${server.address().port}\n`);
    });
  });
  const stop = () => { server.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
