'use strict';
// Loads a page in headless Debian Chromium (driven by playwright-core) and prints a JSON report:
// onload time, protocol per resource (http/1.1, h2), connections used, bytes per object.
//
// Usage: node chromium-load.js OPTIONS.json
//   { "url": URL, "manifest": PATH|null, "resolve": {host: ip}, "spki": [base64 sha256],
//     "timeout_s": S, "chromium": "/usr/bin/chromium", "screenshot": PATH|null,
//     "extra_args": [...] }
// Names resolve through --host-resolver-rules (namespaces have no DNS); the per-run server key is
// trusted through --ignore-certificate-errors-spki-list, so certificate checking stays on for
// everything else. A fresh --user-data-dir per load means a cold cache and new connections.
// Connections are counted from the DevTools protocol's connectionId of each response.

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

async function main() {
  const opts = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const manifest = opts.manifest ? JSON.parse(fs.readFileSync(opts.manifest, 'utf8')) : null;
  const timeoutMs = (opts.timeout_s || 60) * 1000;
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'p4nw-chromium-'));
  const rules = Object.entries(opts.resolve || {}).map(([h, ip]) => `MAP ${h} ${ip}`);
  rules.push('EXCLUDE localhost');
  const args = [
    '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--disable-dev-shm-usage', `--host-resolver-rules=${rules.join(', ')}`,
    ...(opts.spki && opts.spki.length ? [`--ignore-certificate-errors-spki-list=${opts.spki.join(',')}`] : []),
    ...(opts.extra_args || []),
  ];
  const report = {
    loader: 'web/chromium-load.js', protocol: 'chromium', page: manifest ? manifest.page : null,
    options: opts, t_start_wall: Date.now() / 1000, elapsed_ms: null, onload_ms: null, ok: false,
    objects: [], connections: [], errors: [], unknown_references: [], dns: {}, browser: null, args,
  };
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: opts.chromium || '/usr/bin/chromium', headless: true, args,
      ignoreHTTPSErrors: false, timeout: timeoutMs,
    });
    report.browser = context.browser() ? context.browser().version() : null;
    const page = context.pages()[0] || await context.newPage();
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    const reqs = new Map();
    const t0 = Date.now();
    cdp.on('Network.requestWillBeSent', (e) => {
      reqs.set(e.requestId, { url: e.request.url, t_queued: e.timestamp, data: 0, encoded: 0 });
    });
    cdp.on('Network.responseReceived', (e) => {
      const r = reqs.get(e.requestId);
      if (!r) return;
      Object.assign(r, {
        status: e.response.status, protocol: e.response.protocol,
        conn: e.response.connectionId, reused: e.response.connectionReused,
        remote: e.response.remoteIPAddress ? `${e.response.remoteIPAddress}:${e.response.remotePort}` : null,
        tls: e.response.securityDetails ? e.response.securityDetails.protocol : null,
        timing: e.response.timing || null,
      });
    });
    cdp.on('Network.dataReceived', (e) => { const r = reqs.get(e.requestId); if (r) r.data += e.dataLength; });
    cdp.on('Network.loadingFinished', (e) => {
      const r = reqs.get(e.requestId); if (r) { r.encoded = e.encodedDataLength; r.t_done = e.timestamp; }
    });
    cdp.on('Network.loadingFailed', (e) => {
      const r = reqs.get(e.requestId); if (r) r.error = e.errorText;
    });

    await page.goto(opts.url, { waitUntil: 'load', timeout: timeoutMs });
    const nav = await page.evaluate(() => {
      const n = performance.getEntriesByType('navigation')[0];
      const broken = Array.from(document.images).filter((i) => !(i.complete && i.naturalWidth > 0)).length;
      return {
        onload: n ? n.loadEventStart : null, loadEnd: n ? n.loadEventEnd : null,
        protocol: n ? n.nextHopProtocol : null, images: document.images.length, broken,
      };
    });
    report.onload_ms = nav.onload;
    report.navigation = nav;
    if (opts.screenshot) await page.screenshot({ path: opts.screenshot, fullPage: false });

    // Requests' CDP timestamps are seconds on a monotonic clock; make them ms since the first.
    const all = [...reqs.values()].filter((r) => !r.url.startsWith('data:'));
    const base = Math.min(...all.map((r) => r.t_queued));
    const conns = new Map();
    for (const r of all) {
      const key = String(r.conn);
      if (!conns.has(key)) conns.set(key, { id: r.conn, protocol: r.protocol, remote: r.remote, requests: 0, tls_version: r.tls });
      conns.get(key).requests += 1;
    }
    report.connections = [...conns.values()];
    // Name lookups the browser made (no host map: through the namespace's resolv.conf), from
    // the resource timing of the request that paid for each: {host: {t_start, t_done, address}}.
    for (const r of all) {
      const t = r.timing;
      if (!t || t.dnsStart < 0 || t.dnsEnd < 0) continue;
      const host = new URL(r.url).hostname;
      if (report.dns[host]) continue;
      const at = (t.requestTime - base) * 1000;
      report.dns[host] = {
        t_start: Math.round((at + t.dnsStart) * 1e3) / 1e3, t_done: Math.round((at + t.dnsEnd) * 1e3) / 1e3,
        address: r.remote ? r.remote.replace(/:\d+$/, '') : null,
      };
    }
    const byUrl = new Map(all.map((r) => [r.url.replace(/^https?:/, ''), r]));
    const entries = manifest ? manifest.objects : all.map((r) => ({ url: r.url, size: null }));
    for (const e of entries) {
      const key = e.url.replace(/^https?:/, '').replace(/^\/\/([^/:]+):(80|443)\//, '//$1/');
      const r = byUrl.get(key) || byUrl.get(e.url);
      const o = {
        url: e.url, host: e.host, path: e.path, type: e.type, expected_size: e.size,
        status: r ? r.status : null, protocol: r ? r.protocol : null, conn: r ? r.conn : null,
        size: r ? r.data : null, wire_bytes: r ? r.encoded : null,
        t_queued: r ? Math.round((r.t_queued - base) * 1e6) / 1e3 : null,
        t_done: r && r.t_done ? Math.round((r.t_done - base) * 1e6) / 1e3 : null,
        error: null,
      };
      if (!r) o.error = 'not requested';
      else if (r.error) o.error = r.error;
      else if (r.status !== 200) o.error = `status ${r.status}`;
      else if (e.size != null && r.data !== e.size) o.error = `size ${r.data}, expected ${e.size}`;
      report.objects.push(o);
      if (o.error) report.errors.push(`${e.url}: ${o.error}`);
    }
    if (nav.broken) report.errors.push(`${nav.broken} of ${nav.images} images did not decode`);
    const dones = report.objects.map((o) => o.t_done).filter((t) => t !== null);
    report.elapsed_ms = dones.length ? Math.max(...dones) : null;
    report.wall_ms = Date.now() - t0;
    report.ok = report.errors.length === 0;
    report.summary = {
      objects: report.objects.length,
      objects_ok: report.objects.filter((o) => !o.error).length,
      connections: report.connections.length,
      requests_per_connection: report.connections.map((c) => c.requests),
      protocols: [...new Set(all.map((r) => r.protocol).filter(Boolean))].sort(),
      body_bytes: report.objects.reduce((s, o) => s + (o.size || 0), 0),
    };
  } catch (err) {
    report.errors.push(String(err && err.message ? err.message : err));
  } finally {
    if (context) await context.close().catch(() => {});
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exit(0);
}

main();
