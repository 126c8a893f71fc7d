"""The dashboard in real headless Chromium (issue 12 item 1) against a real switch with traffic:
the page shows the traffic moving, a click applies a profile (read back over P4Runtime), an
invalid profile shows the validator's error. With P4NETEM_DOCS_SCREENSHOTS=1 its screenshots replace
docs/img/dashboard*.png (opt-in: a plain test run leaves the work tree clean)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from p4netem.control import Controller
from p4netem.lab.free import free_tcp_port

from webserver import WebServer

HERE = Path(__file__).parent
DOCS_IMG = HERE.parent.parent / "docs" / "img"


@pytest.mark.skipif(shutil.which("node") is None or not Path("/usr/bin/chromium").exists(),
                    reason="needs node and Debian's chromium (scripts/setup-system.sh, setup-web.sh)")
def test_dashboard_shows_traffic_applies_on_click_and_shows_errors(lab, tmp_path):
    web = WebServer(lab.switch.grpc_addr, "--refresh", "0.5", log=tmp_path / "web.log")
    pinger = None
    try:
        assert web.request("POST", "/api/reset", {})[0] == 200
        assert web.request("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})[0] == 200
        # Traffic for the whole run (bounded: 1500 pings at 50/s, 30 s at most).
        pinger = lab.h1.ns.popen(["ping", "-q", "-i", "0.02", "-c", "1500", "-w", "60", lab.h2.ip],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = subprocess.run(["node", str(HERE / "dashboard.js"), web.base + "/", "gprs", str(tmp_path)],
                           capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["ok"], out.get("failure")
        assert not [s for s in out["steps"] if s.startswith("pageerror")], out["steps"]
        first, later = out["packets_in"]
        assert 0 < first < later, out  # the live counters move
        assert out["rules_after_apply"] == ["gprs"], out
        with Controller.connect(lab.switch.grpc_addr, primary=False) as reader:
            assert [a.profile_name for a in reader.applied()] == ["gprs"]
        assert "both.delay" in out["error_text"] and "parsecs" in out["error_text"], out["error_text"]
        if os.environ.get("P4NETEM_DOCS_SCREENSHOTS") != "1":
            return
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name in ("dashboard.png", "dashboard-error.png"):
            shutil.copy(tmp_path / name, DOCS_IMG / name)
    finally:
        if pinger is not None and pinger.poll() is None:
            pinger.terminate()
            pinger.wait(timeout=10)
        web.stop()


# Each page script's start: headless Chromium (the flags of docs/web.md) in a fresh profile
# directory, `out` for its findings, `page` open; the script goes on inside the `try`.
PAGE_PRELUDE_JS = r"""
'use strict';
const fs = require('fs'), os = require('os'), path = require('path');
const { chromium } = require(process.argv[2]);
(async () => {
  const out = { errors: [] };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'p4nw-NAME-'));
  const context = await chromium.launchPersistentContext(dir, { executablePath: '/usr/bin/chromium', headless: true,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'] });
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('pageerror', (e) => out.errors.push(e.message));
"""


def page_prelude(name: str) -> str:
    return PAGE_PRELUDE_JS.replace("NAME", name)


# The page with no rule on the switch: the plots are drawn (empty), the live stream keeps coming,
# and no script error (each live event once threw "reading 'setData'" when no row had traffic).
EMPTY_PAGE_JS = page_prelude("empty") + r"""
    page.on('console', (m) => { if (m.type() === 'error') out.errors.push(m.text()); });
    await page.goto(process.argv[3], { timeout: 60000 });
    await page.waitForFunction(() => document.getElementById('live').textContent === 'live', null, { timeout: 30000 });
    await page.waitForTimeout(2500);
    out.rules = await page.$$eval('#rules tbody tr', (r) => r.length);
    out.plots = await page.$$eval('#plot-throughput .uplot', (p) => p.length);
    out.error_box_hidden = await page.$eval('#error', (e) => e.hidden);
  } catch (e) { out.errors.push(String(e)); } finally {
    await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(out) + '\n');
})();
"""


@pytest.mark.skipif(shutil.which("node") is None or not Path("/usr/bin/chromium").exists(),
                    reason="needs node and Debian's chromium (scripts/setup-system.sh, setup-web.sh)")
def test_dashboard_without_rules_has_no_script_errors(lab, tmp_path):
    web = WebServer(lab.switch.grpc_addr, "--refresh", "0.5", log=tmp_path / "web.log")
    try:
        assert web.request("POST", "/api/reset", {})[0] == 200
        script = tmp_path / "empty.js"
        script.write_text(EMPTY_PAGE_JS)
        playwright = HERE.parent.parent / "web" / "node_modules" / "playwright-core"
        r = subprocess.run(["node", str(script), str(playwright), web.base + "/"], capture_output=True, text=True,
                           timeout=180)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["errors"] == [], out
        assert out["rules"] == 0 and out["plots"] == 1 and out["error_box_hidden"], out
    finally:
        web.stop()


# The page of a web server whose switch is down (here: never started): the badge says "switch
# unavailable" and the red box why, within about the server's connect timeout (it said
# "connecting" for ever, and each of the page's requests took 10 s and more).
DOWN_PAGE_JS = page_prelude("down") + r"""
    const t0 = Date.now();
    await page.goto(process.argv[3], { timeout: 60000 });
    await page.waitForFunction(() => document.getElementById('live').textContent === 'switch unavailable', null,
      { timeout: 30000 });
    out.seconds = (Date.now() - t0) / 1000;
    out.error_text = await page.textContent('#error');
    out.error_box_hidden = await page.$eval('#error', (e) => e.hidden);
  } catch (e) { out.errors.push(String(e)); } finally {
    await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(out) + '\n');
})();
"""


@pytest.mark.skipif(shutil.which("node") is None or not Path("/usr/bin/chromium").exists(),
                    reason="needs node and Debian's chromium (scripts/setup-system.sh, setup-web.sh)")
def test_dashboard_says_switch_unavailable(tmp_path):
    web = WebServer(f"127.0.0.1:{free_tcp_port('127.0.0.1')}", log=tmp_path / "web.log")
    try:
        script = tmp_path / "down.js"
        script.write_text(DOWN_PAGE_JS)
        playwright = HERE.parent.parent / "web" / "node_modules" / "playwright-core"
        r = subprocess.run(["node", str(script), str(playwright), web.base + "/"], capture_output=True, text=True,
                           timeout=180)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["errors"] == [], out
        assert not out["error_box_hidden"] and "unavailable" in out["error_text"], out
    finally:
        web.stop()


# The page of a web server with --switch-metrics while the switch's data-plane thread is stopped:
# the header's badge says "data plane running", then "data plane stalled" (red) with the red box
# naming the thread and its age, then "data plane running" again with the box gone. One JSON line
# per step on stdout; the test stops the thread after the first and lets it run after the second.
STALL_PAGE_JS = page_prelude("stall") + r"""
    const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
    const badge = () => page.$eval('#dataplane', (b) => ({ text: b.textContent, cls: b.className, hidden: b.hidden }));
    const wait = (text) => page.waitForFunction((t) => document.getElementById('dataplane').textContent === t, text,
      { timeout: 90000 });
    await page.goto(process.argv[3], { timeout: 60000 });
    await wait('data plane running');
    out.running = await badge();
    out.box_hidden_running = await page.$eval('#stall', (e) => e.hidden);
    say({ step: 'running' });
    await wait('data plane stalled');
    out.stalled = await badge();
    out.stall_box_hidden = await page.$eval('#stall', (e) => e.hidden);
    out.stall_text = await page.textContent('#stall');
    if (process.argv[4]) await page.screenshot({ path: process.argv[4], clip: { x: 0, y: 0, width: 1000, height: 95 } });
    say({ step: 'stalled' });
    await wait('data plane running');
    out.again = await badge();
    out.box_hidden_again = await page.$eval('#stall', (e) => e.hidden);
  } catch (e) { out.errors.push(String(e)); } finally {
    await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(out) + '\n');
})();
"""


class _Lines:
    """A child's stdout, line by line, each within a deadline (a reader thread)."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in proc.stdout], daemon=True).start()

    def next(self, timeout: float = 150.0) -> dict:
        return json.loads(self.lines.get(timeout=timeout))


@pytest.mark.skipif(shutil.which("node") is None or not Path("/usr/bin/chromium").exists(),
                    reason="needs node and Debian's chromium (scripts/setup-system.sh, setup-web.sh)")
def test_dashboard_shows_a_stalled_data_plane(health_lab, tmp_path):
    from thread_stop import stopped_thread, thread_ids

    lab, url = health_lab
    web = WebServer(lab.switch.grpc_addr, "--switch-metrics", url, log=tmp_path / "web.log")
    node = None
    try:
        script = tmp_path / "stall.js"
        script.write_text(STALL_PAGE_JS)
        playwright = HERE.parent.parent / "web" / "node_modules" / "playwright-core"
        shot = DOCS_IMG / "dashboard-stalled.png" if os.environ.get("P4NETEM_DOCS_SCREENSHOTS") == "1" else ""
        node = subprocess.Popen(["node", str(script), str(playwright), web.base + "/", str(shot)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = _Lines(node)
        step = lines.next()
        assert step == {"step": "running"}, step
        pid = lab.switch.proc.pid
        (tid,) = thread_ids(pid, "p4netem-dp")
        with stopped_thread(pid, tid):
            step = lines.next()
            assert step == {"step": "stalled"}, step
        out = lines.next()
        assert node.wait(timeout=60) == 0, node.stderr.read()
        assert out["errors"] == [], out
        assert out["running"] == {"text": "data plane running", "cls": "badge ok", "hidden": False}, out
        assert out["box_hidden_running"], out
        assert out["stalled"] == {"text": "data plane stalled", "cls": "badge bad", "hidden": False}, out
        assert not out["stall_box_hidden"], out
        assert "data plane stalled: the data-plane loop has not run for" in out["stall_text"], out
        assert out["again"]["text"] == "data plane running" and out["box_hidden_again"], out
    finally:
        if node is not None and node.poll() is None:
            node.kill()
            node.wait(timeout=10)
        web.stop()
