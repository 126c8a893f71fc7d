'use strict';
// SPDY/3.1 page loader: fetches a page by its manifest through node-spdy's agent (one SPDY
// session per host, every request a stream on it) and prints a JSON report shaped like the
// Python loaders' (p4netem_studies.web.loaders.common.LoadReport).
//
// Usage: node spdy-load.js OPTIONS.json
//   { "manifest": PATH, "resolve": {host: ip}, "scheme": "https"|"http", "port": N,
//     "ca_file": PEM, "discover": "stream"|"after-html"|"at-once", "timeout_s": S,
//     "revalidate": bool, "accept_encoding": str, "user_agent": str, "cookie": str|null,
//     "window": BYTES }
// Objects are discovered in the HTML as it arrives, as the Python loaders do.

const fs = require('fs');
const net = require('net');
const https = require('https');
const zlib = require('zlib');
const crypto = require('crypto');
const dns = require('dns');
const spdy = require('spdy');
const inlineZlib = require('./spdy-inline-zlib');

const ACCEPT = {
  html: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  image: 'image/avif,image/webp,image/apng,image/*,*/*;q=0.8',
  script: '*/*',
  stylesheet: 'text/css,*/*;q=0.1',
};
const REF = /(?:src|href)\s*=\s*"([^"]+)"/g;

function splitUrl(url, defaultHost) {
  let rest;
  if (url.startsWith('//')) rest = url.slice(2);
  else if (url.includes('://')) rest = url.split('://')[1];
  else return [defaultHost, url.startsWith('/') ? url : '/' + url];
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  return [authority.split(':')[0].toLowerCase(), slash < 0 ? '/' : rest.slice(slash)];
}

function decode(body, enc) {
  enc = (enc || 'identity').toLowerCase();
  if (enc === 'identity') return body;
  if (enc === 'gzip' || enc === 'x-gzip') return zlib.gunzipSync(body);
  if (enc === 'deflate') { try { return zlib.inflateSync(body); } catch (e) { return zlib.inflateRawSync(body); } }
  throw new Error(`unsupported content-encoding ${enc}`);
}

// node-spdy's own plain mode wraps each stream in a net.Socket that Node 20 aborts after the last
// DATA frame (ECONNRESET on the request). Its TLS-flavoured agent wraps streams in spdy.Socket,
// which works, so plain SPDY uses that agent over a plain TCP socket: 'connect' is announced as
// 'secureConnect' and the protocol comes from options.spdy.protocol (spdy/3.1).
class PlainSpdyAgent extends spdy.Agent {
  createConnection(options) {
    const socket = net.connect(options);
    socket.once('connect', () => socket.emit('secureConnect'));
    return socket;
  }
}

// A browser's SPDY stack is warm when a page load starts; this loader is a fresh node process
// per load, and node compiles each function of node-spdy (framer, zlib header contexts, stream
// and scheduler objects) on its first call. Cold, that cost fell inside the measured load:
// 20 ms between the first connection's handshake and its first frame, where the second
// connection took 3 ms (docs/labs.md). So one SPDY exchange over loopback, with an in-process
// server and the same agent class and headers, runs before the load and before its clock. It
// shares no state with the load: every connection has its own compression contexts.
function warmUp(headers, done) {
  const server = spdy.createServer({ spdy: { protocols: ['spdy/3.1'], plain: false, ssl: true } },
    (req, res) => { const body = Buffer.alloc(4096, 120); res.writeHead(200, { 'content-length': body.length }); res.end(body); });
  const tcp = net.createServer((socket) => { socket.setNoDelay(true); server._handleConnection(socket, 'spdy/3.1'); });
  let left = 2;
  const finish = (agent) => { agent.close(() => {}); tcp.close(); done(); };
  tcp.listen(0, '127.0.0.1', () => {
    const agent = new PlainSpdyAgent({ host: 'localhost', port: tcp.address().port, spdy: { protocols: ['spdy/3.1'], protocol: 'spdy/3.1' } });
    agent._spdyState.socket.setNoDelay(true);
    for (let i = 0; i < 2; i += 1) {
      const req = https.request({ agent, host: 'localhost', port: tcp.address().port, path: `/warm${i}`, method: 'GET', headers });
      req.on('response', (res) => { res.on('data', () => {}); res.on('end', () => { left -= 1; if (left === 0) finish(agent); }); });
      req.on('error', () => { left -= 1; if (left === 0) finish(agent); });
      req.end();
    }
  });
  tcp.on('error', () => done());
}

function main() {
  const opts = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  // Header blocks coded inline, as Chromium's SPDY stack does, not through libuv's thread pool
  // (web/spdy-inline-zlib.js; P4NETEM_SPDY_HEADER_ZLIB=async for node-spdy's own path).
  if (process.env.P4NETEM_SPDY_HEADER_ZLIB !== 'async') inlineZlib.install();
  if (opts.warmup !== false && !opts._warm) {
    const headers = { host: 'localhost', 'user-agent': opts.user_agent || 'Mozilla/5.0 p4netem-loader/1',
      accept: ACCEPT.html, 'accept-encoding': 'gzip, deflate', 'accept-language': 'en-US,en;q=0.9' };
    let started = false;
    const start = () => { if (started) return; started = true; opts._warm = true; run(opts); };
    setTimeout(start, 2000);  // never let the warm-up hold the load back
    warmUp(headers, start);
    return;
  }
  run(opts);
}

function run(opts) {
  const manifest = JSON.parse(fs.readFileSync(opts.manifest, 'utf8'));
  const scheme = opts.scheme || 'https';
  const secure = scheme === 'https';
  const port = opts.port || (secure ? 443 : 80);
  const discover = opts.discover || 'stream';
  const ca = opts.ca_file ? fs.readFileSync(opts.ca_file) : undefined;
  const resolve = {};
  for (const [k, v] of Object.entries(opts.resolve || {})) resolve[k.toLowerCase()] = v;
  const t0 = process.hrtime.bigint();
  const ms = () => Math.round(Number(process.hrtime.bigint() - t0) / 1e3) / 1e3;

  const entries = manifest.objects;
  const root = entries[0];
  const byTarget = new Map(entries.map((e) => [`${e.host} ${e.path}`, e]));
  const results = new Map(entries.map((e) => [e, {
    url: e.url, host: e.host, path: e.path, type: e.type, expected_size: e.size, conn: null,
    stream: null, status: null, size: null, wire_body_bytes: null, header_bytes: null,
    request_header_bytes: null, content_encoding: null, t_queued: null, t_sent: null,
    t_first_byte: null, t_done: null, retries: 0, error: null, discovered: true,
  }]));
  const report = {
    loader: 'web/spdy-load.js', protocol: 'spdy/3.1', page: manifest.page,
    options: Object.assign({}, opts, { cookie: undefined }), t_start_wall: Date.now() / 1000,
    elapsed_ms: null, onload_ms: null, ok: false, objects: [], connections: [], errors: [],
    unknown_references: [], dns: {},
  };
  const agents = new Map();
  const requested = new Set();
  let outstanding = entries.length;
  let finished = false;
  const found = [];
  const seen = new Set();

  function agentFor(host) {
    if (agents.has(host)) return agents.get(host);
    const address = resolve[host];
    if (!address && !opts.dns) throw new Error(`no address for host ${host}`);
    const rec = {
      id: agents.size + 1, host, address, port, t_start: ms(), t_connected: null, t_secure: null,
      alpn: null, tls_version: null, requests: 0, bytes_sent: 0, bytes_received: 0,
      t_closed: null, error: null,
    };
    report.connections.push(rec);
    // The agent names its session's :host after `host`, so connect by name and resolve it here
    // from the lab's host map, or (opts.dns) with the system resolver, timed like a browser's.
    let lookup;
    if (address) {
      const family = address.includes(':') ? 6 : 4;
      lookup = (name, lopts, cb) => (lopts && lopts.all
        ? cb(null, [{ address, family }]) : cb(null, address, family));
    } else {
      lookup = (name, lopts, cb) => {
        const d = { t_start: ms(), t_done: null, address: null };
        report.dns[host] = d;
        dns.lookup(name, { family: 4 }, (err, a, fam) => {
          d.t_done = ms();
          d.address = a || null;
          rec.address = a || null;
          if (lopts && lopts.all) cb(err, err ? undefined : [{ address: a, family: fam }]);
          else cb(err, a, fam);
        });
      };
    }
    const agentOpts = {
      host, port, servername: host, ca, rejectUnauthorized: true, lookup,
      spdy: {
        protocols: ['spdy/3.1'], protocol: 'spdy/3.1',
        connection: { windowSize: opts.window || (10 << 20) },
      },
    };
    const agent = secure ? spdy.createAgent(agentOpts) : new PlainSpdyAgent(agentOpts);
    const sock = agent._spdyState.socket;
    // Nagle off, as curl, nghttp and Chromium have it: with it on, a small frame (a request, a
    // WINDOW_UPDATE) written while an earlier one is unacknowledged waits for the peer's delayed
    // ACK (40 ms on Linux), which SPDY would pay and HTTP/2 not.
    sock.setNoDelay(true);
    sock.once('connect', () => { rec.t_connected = ms(); });
    if (secure) {
      sock.once('secureConnect', () => {
        rec.t_secure = ms();
        rec.alpn = sock.alpnProtocol || null;
        rec.tls_version = sock.getProtocol ? sock.getProtocol() : null;
      });
    } else {
      rec.alpn = null;  // no ALPN without TLS: the session is spdy/3.1 by configuration
    }
    sock.on('close', () => { rec.t_closed = ms(); rec.bytes_sent = sock.bytesWritten; rec.bytes_received = sock.bytesRead; });
    agent.on('error', (err) => { rec.error = String(err); failHost(host, `agent: ${err.message}`); });
    const entry = { agent, rec, sock };
    agents.set(host, entry);
    return entry;
  }

  function failHost(host, msg) {
    for (const e of entries) {
      const r = results.get(e);
      if (e.host === host && requested.has(e) && r.t_done === null) done(e, null, null, msg);
    }
  }

  function want(e, discovered = true) {
    if (requested.has(e) || finished) return;
    requested.add(e);
    const r = results.get(e);
    r.t_queued = ms();
    r.discovered = discovered;
    let a;
    try { a = agentFor(e.host); } catch (err) { done(e, null, null, err.message); return; }
    const headers = {
      host: port === (secure ? 443 : 80) ? e.host : `${e.host}:${port}`,
      'user-agent': opts.user_agent || 'Mozilla/5.0 p4netem-loader/1',
      accept: ACCEPT[e.type] || '*/*',
      'accept-encoding': opts.accept_encoding || 'gzip, deflate',
      'accept-language': 'en-US,en;q=0.9',
    };
    if (e.type !== 'html') headers.referer = `${scheme}://${e.host}/`;
    if (opts.cookie) headers.cookie = opts.cookie;
    if (opts.revalidate) headers['if-modified-since'] = manifest.last_modified;
    const req = https.request({
      agent: a.agent, host: e.host, port, path: e.path, method: 'GET', headers,
    });
    r.t_sent = ms();
    a.rec.requests += 1;
    r.conn = a.rec.id;
    req.on('response', (res) => {
      r.t_first_byte = ms();
      r.status = res.statusCode;
      r.content_encoding = res.headers['content-encoding'] || null;
      if (req.spdyStream || res.spdyStream) r.stream = (req.spdyStream || res.spdyStream).id;
      const chunks = [];
      let dz = null;
      if (e === root && r.content_encoding === 'gzip') dz = zlib.createGunzip();
      if (dz) dz.on('data', (d) => scan(d));
      res.on('data', (d) => {
        chunks.push(d);
        if (e === root && res.statusCode === 200) { if (dz) dz.write(d); else scan(d); }
      });
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        r.wire_body_bytes = raw.length;
        let body = null;
        let err = null;
        if (res.statusCode === 200) {
          try { body = decode(raw, r.content_encoding); } catch (x) { err = `bad body encoding: ${x.message}`; }
          if (e === root && body) scanAll(body);
        }
        done(e, res.statusCode, body, err);
      });
      res.on('error', (err) => done(e, res.statusCode, null, String(err)));
    });
    req.on('error', (err) => done(e, null, null, String(err)));
    req.end();
  }

  let htmlText = '';
  let scanPos = 0;
  function scan(buf) {
    htmlText += buf.toString('latin1');
    REF.lastIndex = scanPos;
    let m;
    while ((m = REF.exec(htmlText)) !== null) {
      scanPos = REF.lastIndex;
      const [host, path] = splitUrl(m[1], root.host);
      const key = `${host} ${path}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const e = byTarget.get(key);
      if (!e) { report.unknown_references.push(m[1]); continue; }
      if (e === root) continue;
      if (discover === 'stream') want(e); else found.push(e);
    }
    scanPos = Math.max(scanPos, htmlText.length - 1024);
  }
  function scanAll(body) {
    // Make sure the whole decoded document was scanned (gunzip stream may lag behind 'end').
    if (htmlText.length < body.length) scan(body.subarray(htmlText.length));
  }

  function done(e, status, body, err) {
    const r = results.get(e);
    if (r.t_done !== null) return;
    r.t_done = ms();
    r.status = status;
    if (err) r.error = err;
    else {
      const want200 = opts.revalidate ? 304 : 200;
      if (status !== want200) r.error = `status ${status}, expected ${want200}`;
      else if (body) {
        r.size = body.length;
        if (body.length !== e.size) r.error = `size ${body.length}, expected ${e.size}`;
        else if (crypto.createHash('sha256').update(body).digest('hex') !== e.sha256) r.error = 'content differs from the manifest (sha256)';
      }
    }
    if (e === root) {
      for (const f of found) want(f);
      for (const o of entries.slice(1)) want(o, false);
    }
    outstanding -= 1;
    if (outstanding === 0) finish();
  }

  const timer = setTimeout(() => {
    report.errors.push(`page not complete after ${opts.timeout_s || 60}s`);
    finish();
  }, (opts.timeout_s || 60) * 1000);

  function finish() {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    report.objects = entries.map((e) => results.get(e));
    const dones = report.objects.filter((o) => o.t_done !== null).map((o) => o.t_done);
    report.elapsed_ms = dones.length ? Math.max(...dones) : null;
    for (const o of report.objects) {
      if (o.error || o.t_done === null) report.errors.push(`${o.url}: ${o.error || 'not fetched'}`);
    }
    for (const a of agents.values()) {
      a.rec.bytes_sent = a.sock.bytesWritten;
      a.rec.bytes_received = a.sock.bytesRead;
    }
    for (const c of report.connections) {
      // node-spdy silently falls back to HTTP/1.1 when ALPN does not pick SPDY: that is a failure.
      if (secure && c.alpn !== 'spdy/3.1') report.errors.push(`connection ${c.id} to ${c.host}: ALPN ${c.alpn}, not spdy/3.1`);
    }
    report.ok = report.errors.length === 0;
    const conns = report.connections;
    report.summary = {
      objects: report.objects.length,
      objects_ok: report.objects.filter((o) => o.t_done !== null && !o.error).length,
      connections: conns.length,
      requests_per_connection: conns.map((c) => c.requests),
      alpn: [...new Set(conns.map((c) => c.alpn).filter(Boolean))].sort(),
      bytes_sent: conns.reduce((s, c) => s + c.bytes_sent, 0),
      bytes_received: conns.reduce((s, c) => s + c.bytes_received, 0),
      body_bytes: report.objects.reduce((s, o) => s + (o.size || 0), 0),
    };
    process.stdout.write(JSON.stringify(report) + '\n', () => {
      for (const a of agents.values()) a.sock.destroy();
      process.exit(0);
    });
  }

  want(root);
  if (discover === 'at-once') for (const e of entries.slice(1)) want(e);
}

main();
