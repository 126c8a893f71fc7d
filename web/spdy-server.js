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
const net = require('net');
const path = require('path');
const spdy = require('spdy');

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

function main() {
  const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const root = path.resolve(cfg.root);
  const log = fs.openSync(cfg.log || '/dev/null', 'a');
  const plain = !cfg.tls;
  const protocols = cfg.protocols || ['spdy/3.1', 'http/1.1'];
  const connIds = new WeakMap();
  let nextConn = 1;
  const connCounts = new Map();

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
      fs.writeSync(log, JSON.stringify({
        msec: Date.now() / 1000, conn, conn_req: connReq, spdy: !!req.isSpdy,
        version: req.isSpdy ? String(req.spdyVersion) : req.httpVersion,
        alpn: (req.socket && req.socket.alpnProtocol) || null,
        stream: req.spdyStream ? req.spdyStream.id : null, host, uri: req.url, status,
        body_bytes: bytes, request_time: Number(process.hrtime.bigint() - t0) / 1e9,
      }) + '\n');
    };
    if (!host || !file.startsWith(root + path.sep + host + path.sep)) {
      res.writeHead(400, {'content-length': 0}); res.end(); done(400, 0); return;
    }
    // Files are read synchronously and kept: the content is small, static for the server's
    // life and in the page cache, and each asynchronous hop (stat, then read, through libuv's
    // thread pool) cost tens of ms of a response on a busy 2-core machine (the RTT audit's
    // server_ms), time nginx does not spend.
    const f = fileOf(file);
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
  server.listen(cfg.port, cfg.address || '0.0.0.0', () => {
    process.stdout.write(`listening ${server.address().port}\n`);
  });
  const stop = () => { server.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
