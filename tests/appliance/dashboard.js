// Drives the p4netem dashboard in headless Debian Chromium (playwright-core from web/node_modules),
// as a person would: waits for the live counters to show traffic, clicks Apply with a profile, then
// validates an invalid profile and reads the error the page shows. Screenshots go to argv[4].
// Usage: node dashboard.js URL PROFILE_TO_APPLY SCREENSHOT_DIR  -> one JSON object on stdout.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require(path.join(__dirname, '../../web/node_modules/playwright-core'));

(async () => {
  const [url, profile, shots] = process.argv.slice(2);
  const out = { steps: [] };
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'p4nw-dash-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium', headless: true, timeout: 60000,
    viewport: { width: 1400, height: 1100 },
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('pageerror', (e) => out.steps.push(`pageerror: ${e.message}`));
    await page.goto(url, { timeout: 60000 });
    // 1. The live counters show the traffic: the uplink row's packets in keep growing.
    const inCount = async () => page.$$eval('#counters tbody tr', (rows) => rows
      .map((r) => [...r.children].map((td) => td.textContent))
      .filter((c) => c[0] === '#1' && c[1] === 'uplink').map((c) => Number(c[3]))[0] || 0);
    await page.waitForFunction(() => [...document.querySelectorAll('#counters tbody tr')]
      .some((r) => r.children[0].textContent === '#1' && Number(r.children[3].textContent) > 0), null, { timeout: 60000 });
    const first = await inCount();
    // Until the counter has moved on (the page refreshes every 0.5 s; the pings go on); 3 s for the
    // screenshots of the docs, whose plot then shows some history.
    if (process.env.P4NETEM_DOCS_SCREENSHOTS === '1') await page.waitForTimeout(3000);
    await page.waitForFunction((n) => [...document.querySelectorAll('#counters tbody tr')]
      .map((r) => [...r.children].map((td) => td.textContent))
      .some((c) => c[0] === '#1' && c[1] === 'uplink' && Number(c[3]) > n), first, { timeout: 30000 });
    out.packets_in = [first, await inCount()];
    out.plot_points = await page.evaluate(() => document.querySelectorAll('#plot-throughput .u-over').length);
    await page.screenshot({ path: path.join(shots, 'dashboard.png'), fullPage: true });
    // 2. Apply a profile with a click; the rules table shows it once the switch took it.
    await page.selectOption('#apply-profile', profile);
    await page.fill('#apply-rules', 'client=10.0.0.1');
    await page.click('#apply-button');
    await page.waitForFunction((p) => [...document.querySelectorAll('#rules tbody tr')]
      .some((r) => r.children[2].textContent.startsWith(p)), profile, { timeout: 30000 });
    out.rules_after_apply = await page.$$eval('#rules tbody tr', (rows) => rows.map((r) => r.children[2].textContent));
    // 3. An invalid profile: the page shows the validator's field-named error.
    await page.fill('#upload-yaml', 'name: broken\nboth:\n  delay: 30 parsecs\n');
    await page.click('#validate-button');
    await page.waitForSelector('#error:not([hidden])', { timeout: 30000 });
    out.error_text = await page.textContent('#error');
    await page.screenshot({ path: path.join(shots, 'dashboard-error.png'), fullPage: true });
    out.ok = true;
  } catch (e) {
    out.ok = false;
    out.failure = String(e && e.stack || e);
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(out) + '\n');
})();
