'use strict';
// Opens a report page in headless Debian Chromium (playwright-core) and prints what a reader
// sees as JSON: every request the page made (URL and whether it left the file), the tables
// (class, rows), the images (how each is embedded, whether it decoded), the claim verdicts.
// Every request that is not the file itself or a data: URI is aborted and listed, so a page
// that needs the network shows up both as a request and as a broken image or missing style.
//
// Usage: NODE_PATH=web/node_modules node report_offline.js REPORT.html [SCREENSHOT.png]

const path = require('path');
const { chromium } = require('playwright-core');

async function main() {
  const file = path.resolve(process.argv[2]);
  const shot = process.argv[3] || null;
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage'],
  });
  const out = { requests: [], external: [], tables: [], images: [], verdicts: [] };
  try {
    const context = await browser.newContext({ offline: true });
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url === `file://${file}` || url.startsWith('data:')) return route.continue();
      out.external.push(url);
      return route.abort();
    });
    const page = await context.newPage();
    page.on('request', (r) => out.requests.push(r.url().slice(0, 120)));
    await page.goto(`file://${file}`, { waitUntil: 'load', timeout: 60000 });
    Object.assign(out, await page.evaluate(() => ({
      title: document.title,
      tables: Array.from(document.querySelectorAll('table')).map((t) => ({
        cls: t.className, rows: t.rows.length, cells: t.querySelectorAll('td').length })),
      images: Array.from(document.images).map((i) => ({
        cls: i.className, scheme: i.src.split(':')[0], mime: i.src.slice(5, i.src.indexOf(';')),
        ok: i.complete && i.naturalWidth > 0, width: i.naturalWidth })),
      verdicts: Array.from(document.querySelectorAll('.claim h3 .verdict')).map((v) => v.textContent),
      headings: Array.from(document.querySelectorAll('h2')).map((h) => h.textContent),
    })));
    if (shot) await page.screenshot({ path: shot, fullPage: true });
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
