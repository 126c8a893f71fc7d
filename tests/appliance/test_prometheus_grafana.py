"""The monitoring face as an operator sets it up: a real Prometheus (Debian's `prometheus`, from
scripts/setup-system.sh) scraping `p4netem web --token ... --switch-metrics ...` with the scrape
configuration *taken from docs/web.md* (only the address and the token put in), while traffic goes
through a profile that feeds every panel of docs/grafana-p4netem.json (loss, queue drops,
duplicates, corruption, an LTE radio that promotes) and the rule's profile is switched to another
and back. Through Prometheus's HTTP API: the target is up; every panel expression (Grafana's
variables substituted as Grafana does) is valid PromQL and returns data, the labels its legend
names are on its series, and no two series share a legend; the drops panel counts drops once
across the switch; the template variable lists the rule; no counter resets across the switches.
Both /metrics bodies pass `promtool check metrics`."""

from __future__ import annotations

import json
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus_text
from prometheus_client.registry import Collector, CollectorRegistry

from p4netem.lab.free import free_tcp_port
from p4netem.lab.netns import stop_process

from webserver import WebServer, until

DOCS = Path(__file__).resolve().parents[2] / "docs"
TOKEN = "p4n-grafana-token"
SCRAPE_S = 1.0  # the doc's scrape_interval (checked below)
PROFILE = """
name: dash-all-panels
both:
  delay: 2ms
uplink:
  rate: 1Mbit
  queue: 4
  loss: 10%
  duplicate: 10%
  corrupt: 10%
radio:
  model: lte
  promotion: 50ms
"""
BLACKHOLE = "name: dash-blackhole\nuplink:\n  loss: 100%\n"


def _doc_scrape_config() -> str:
    """The Prometheus configuration block of docs/web.md: the indented block that starts with
    `scrape_configs:`, as an operator would copy it."""
    text = (DOCS / "web.md").read_text()
    m = re.search(r"^( {4}scrape_configs:\n(?: {4}.*\n| *\n)+)", text, re.M)
    assert m, "docs/web.md has no indented `scrape_configs:` block"
    return "\n".join(line[4:] for line in m.group(1).rstrip().splitlines()) + "\n"


def _grafana_expr(expr: str, rate_interval_s: float) -> str:
    """An expression as Grafana sends it to Prometheus: $__rate_interval is
    max($__interval + scrape interval, 4 x scrape interval) with the data source's scrape
    interval set to the doc's (and $__interval at its floor, that interval); the `rule` variable at
    its "All" value (allValue in the JSON)."""
    out = expr.replace("$__rate_interval", f"{int(rate_interval_s)}s").replace("$__interval", f"{int(SCRAPE_S)}s")
    out = out.replace("$rule", ".*").replace("${rule}", ".*")
    # `$1` is label_replace's first group: Grafana leaves a `$NAME` of no variable as it is.
    assert not re.search(r"\$(?!\d)", out), f"a Grafana variable this test does not substitute: {expr}"
    return out


class Prometheus:
    def __init__(self, config: str, workdir: Path):
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is missing: `make setup` installs it (scripts/setup-system.sh)", pytrace=False)
        self.port = free_tcp_port("127.0.0.1")
        self.base = f"http://127.0.0.1:{self.port}"
        (workdir / "prometheus.yml").write_text(config)
        self.log = workdir / "prometheus.log"
        self.proc = subprocess.Popen(
            [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(self.base + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus not ready in 30 s:\n{self.log.read_text()}")
            time.sleep(0.1)

    def api(self, path: str, **params) -> dict:
        url = f"{self.base}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as err:
            return json.loads(err.read())

    def wait_for(self, metric: str, after: float, timeout: float = 30) -> None:
        """Until Prometheus holds a sample of `metric` scraped after `after` (wall-clock seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.api("query", query=f"timestamp({metric})")["data"]["result"]
            if result and float(result[0]["value"][1]) > after:
                return
            time.sleep(0.2)
        raise AssertionError(f"no scrape of {metric} after {after} within {timeout} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        stop_process(self.proc, grace=15)


def _port_outside_the_ephemeral_range() -> int:
    """A TCP port free now and below the kernel's ephemeral range: no outgoing connection takes it
    meanwhile, as one may take a port the kernel picked (free_tcp_port) before anyone listens."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in random.sample(range(max(1024, low - 12000), low), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port below the ephemeral range")


@pytest.fixture(scope="module")
def prometheus_of():
    """Each Prometheus test's own Prometheus ("panels": docs/web.md's scrape configuration;
    "alerts": the same with docs/prometheus-alerts.yml as its rule file), both started with the
    module's first test that asks, each scraping the port its test's web server will listen on:
    Prometheus takes a new target up only some 5-6 s after it starts (its discovery and scrape
    managers sync every 5 s), and this way the second test's wait goes on while the first one
    runs. Until its web server listens a target is down, which no test looks at: the queries are
    of the test's own window. {name: (web port, Prometheus)}."""
    proms: dict[str, tuple[int, Prometheus]] = {}
    workdirs = []
    try:
        for name, head in (("panels", ""), ("alerts", f"rule_files: [{ALERTS}]\n")):
            port = _port_outside_the_ephemeral_range()
            scrape = _doc_scrape_config().replace("switch-host:8080", f"127.0.0.1:{port}").replace("TOKEN", TOKEN)
            workdirs.append(Path(tempfile.mkdtemp(prefix=f"p4netem-prometheus-{name}-")))
            proms[name] = (port, Prometheus(head + scrape, workdirs[-1]))
        yield proms
    finally:
        for _, prom in proms.values():
            prom.stop()
        for d in workdirs:
            shutil.rmtree(d, ignore_errors=True)


def _promtool(body: str) -> str:
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=60)
    return (r.stdout + r.stderr).strip() if r.returncode else ""


def _as_text_format(openmetrics_body: str) -> str:
    """The switch's OpenMetrics body in the text format promtool 2.42 lints (it reads only that:
    on OpenMetrics it takes `counter x` with samples `x_total` for two families)."""
    families = list(openmetrics(openmetrics_body))

    class Parsed(Collector):
        def collect(self):
            return iter(families)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Parsed())
    return generate_latest(registry).decode()


def text_metrics(web) -> dict[tuple, float]:
    text = web.request("GET", "/metrics", token=TOKEN)[1]
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in prometheus_text(text) for s in f.samples}


def _sample(metrics: dict, name: str, **labels: str) -> float:
    hits = [v for (n, ls), v in metrics.items() if n == name and all(dict(ls).get(k) == w for k, w in labels.items())]
    assert len(hits) == 1, (name, labels)
    return hits[0]


def _legend(fmt: str, labels: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)


def test_dashboard_queries_return_data_from_prometheus_scraping_as_documented(health_lab, prometheus_of, tmp_path):
    lab, switch_metrics = health_lab
    doc = _doc_scrape_config()
    assert "switch-host:8080" in doc and "TOKEN" in doc, doc
    assert re.search(r"scrape_interval: *1s", doc), doc  # SCRAPE_S
    port, prom = prometheus_of["panels"]    # scraping `doc` with the address and token put in
    web = WebServer(lab.switch.grpc_addr, "--token", TOKEN, "--switch-metrics", switch_metrics,
                    log=tmp_path / "web.log", port=port)
    rule = ["client=10.0.0.1,ue=1"]
    try:

        assert web.request("POST", "/api/reset", {}, token=TOKEN)[0] == 200
        for yaml in (PROFILE, BLACKHOLE):
            assert web.request("POST", "/api/profiles", {"yaml": yaml}, token=TOKEN)[0] == 201
        status, applied = web.request("POST", "/api/apply", {"profile": "dash-all-panels", "rules": rule}, token=TOKEN)
        assert status == 200, applied
        # Prometheus takes up new targets some seconds after it starts (its scrape manager syncs
        # them every 5 s): the traffic starts once it has scraped the rule, so every counter has
        # a sample from before it.
        prom.wait_for("p4netem_switch_up", after=time.time())
        t0 = time.time()

        # Traffic for every panel: 150 pings of 1200 bytes at 2 ms (4.8 Mbit/s into a 1 Mbit/s
        # link with a 4-packet queue: queue drops), 10 % loss, duplicates and corruption; the first
        # one wakes the UE's radio (a promotion).
        flood = ["ping", "-c", "150", "-i", "0.002", "-s", "1200", "-q", "-W", "1", lab.h2.ip]
        lab.h1.ns.run(flood, check=False, timeout=60)
        prom.wait_for("p4netem_switch_up", after=time.time())
        # The rule's profile switched to another and back, as a timeline does: the rule's
        # counters go on across it (they are the rule's, cumulative), under the `profile` label of
        # the moment. The other one drops every uplink packet (20 loss_random drops).
        assert web.request("POST", "/api/apply", {"profile": "dash-blackhole", "rules": rule}, token=TOKEN)[0] == 200
        prom.wait_for("p4netem_switch_up", after=time.time())  # 2 scrapes under it: a rate() for its series
        lab.h1.ns.run(["ping", "-c", "20", "-i", "0.01", "-q", "-W", "1", lab.h2.ip], check=False, timeout=60)
        prom.wait_for("p4netem_switch_up", after=time.time())
        assert web.request("POST", "/api/apply", {"profile": "dash-all-panels", "rules": rule}, token=TOKEN)[0] == 200
        lab.h1.ns.run(flood, check=False, timeout=60)
        prom.wait_for("p4netem_switch_up", after=time.time() + 2 * SCRAPE_S)
        t1 = time.time()

        targets = prom.api("targets")["data"]["activeTargets"]
        assert targets and all(t["health"] == "up" for t in targets), targets

        # Every panel as Grafana asks for it: a range query over the run, one point per scrape.
        rate_interval = max(SCRAPE_S + SCRAPE_S, 4 * SCRAPE_S)
        dashboard = json.loads((DOCS / "grafana-p4netem.json").read_text())
        problems = []
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                expr = _grafana_expr(target["expr"], rate_interval)
                answer = prom.api("query_range", query=expr, start=t0, end=t1, step=SCRAPE_S)
                where = f"{panel['title']!r} {target['refId']} {expr}"
                if answer["status"] != "success":
                    problems.append(f"{where}: {answer.get('error')}")
                    continue
                series = answer["data"]["result"]
                # The queue may be empty at every scrape; everything else moved with the traffic.
                if not any(float(v) != 0 for s in series for _, v in s["values"]) and "queue_packets" not in expr:
                    problems.append(f"{where}: {len(series)} series, none with a value other than 0")
                elif not series:
                    problems.append(f"{where}: no series")
                fmt = target.get("legendFormat", "")
                for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", fmt):
                    if any(label not in s["metric"] for s in series):
                        problems.append(f"{where}: legend {{{{{label}}}}} is not a label of its series")
                # Two series under one legend are two lines of the same name in Grafana (one per
                # profile the rule had): the reader cannot tell them apart.
                legends = [_legend(fmt, s["metric"]) for s in series]
                if len(set(legends)) != len(legends):
                    problems.append(f"{where}: several series under one legend: {sorted(legends)}")
        assert not problems, "\n".join(problems)

        # Over a window that spans the switch and back (Grafana's $__rate_interval is 4 scrape
        # intervals of its data source, 1 min at its default 15 s: a timeline's steps are often
        # shorter), the drops panel shows the rule's drops once: the series of the first profile
        # counted the other's drops too (the counters are the rule's), so adding up the series of
        # both profiles counts those twice.
        window = int(t1 - t0) + 3
        (drops,) = [t for p in dashboard["panels"] for t in p.get("targets", []) if "dropped_packets" in t["expr"]]
        panel = prom.api("query", query=_grafana_expr(drops["expr"], window), time=t1)["data"]["result"]
        shown = [float(s["value"][1]) * window for s in panel
                 if (s["metric"].get("rule"), s["metric"].get("direction"), s["metric"].get("reason"))
                 == ("#1", "uplink", "loss_random")]
        truth = _sample(text_metrics(web), "p4netem_dropped_packets_total", rule="#1", direction="uplink",
                        reason="loss_random")
        assert truth >= 20 and len(shown) == 1 and truth * 0.8 <= shown[0] <= truth * 1.2, (shown, truth)

        # The `rule` variable's query (label_values(METRIC, LABEL)) lists the rule.
        var = next(v for v in dashboard["templating"]["list"] if v["name"] == "rule")
        metric, label = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", var["query"]).groups()
        assert "#1" in prom.api(f"label/{label}/values", **{"match[]": metric})["data"]

        # No counter went down across the profile switches (rate() would take it for a restart).
        text = web.request("GET", "/metrics", token=TOKEN)[1]
        counters = re.findall(r"^# TYPE (\w+) counter$", text, re.M)
        assert "p4netem_packets_in_total" in counters
        for name in counters:
            reset = prom.api("query", query=f"resets({name}[{int(t1 - t0) + 5}s]) > 0", time=t1)["data"]["result"]
            assert reset == [], (name, reset)

        # The exposition itself by Prometheus's own linter: the web's (its families and the
        # switch's re-exported) and the switch's.
        assert _promtool(text) == ""
        with urllib.request.urlopen(switch_metrics, timeout=10) as r:
            switch_text = _as_text_format(r.read().decode())
        assert "p4netem_switch_ring_drops_total" in switch_text
        assert _promtool(switch_text) == ""
    finally:
        web.stop()


ALERTS = DOCS / "prometheus-alerts.yml"
HEARTBEAT_PANEL = "Data-plane heartbeat age (s)"
STALL_WAIT_S = 90.0  # generous on a loaded 2-core machine: a stall shows within ~3 s + 2 scrapes + 5 s

# The alert rules' own unit test (promtool test rules): series as a Prometheus scrape of the web
# server stores them, with the target's `instance` and `job` labels on every one. The loop stalled
# (9 s > 3 s), a TX thread stalled, both fresh: one alert per stalled thread, with its labels.
ALERT_TESTS = """
rule_files: [RULES]
evaluation_interval: 5s
tests:
  - interval: 5s
    input_series:
      - series: 'p4netem_switch_heartbeat_age_seconds{instance="h:8080",job="p4netem",thread="dataplane"}'
        values: '0.1 0.1 9 14'
      - series: 'p4netem_switch_heartbeat_age_seconds{instance="h:8080",job="p4netem",thread="tx",port="1",iface="eth1"}'
        values: '0.5 0.5 0.5 0.5'
      - series: 'p4netem_switch_heartbeat_timeout_seconds{instance="h:8080",job="p4netem"}'
        values: '3 3 3 3'
      - series: 'p4netem_switch_health_up{instance="h:8080",job="p4netem"}'
        values: '1 1 1 1 0 0 0 0'
      - series: 'p4netem_switch_up{instance="h:8080",job="p4netem"}'
        values: '1 1 1 1 1 1 1 1'
    alert_rule_test:
      - eval_time: 5s
        alertname: P4netemDataPlaneStalled
        exp_alerts: []
      - eval_time: 15s
        alertname: P4netemDataPlaneStalled
        exp_alerts:
          - exp_labels: {instance: "h:8080", job: p4netem, thread: dataplane, severity: critical}
            exp_annotations: {summary: "p4netem h:8080: data-plane thread dataplane has not run for 14s"}
      - eval_time: 35s
        alertname: P4netemSwitchHealthUnknown
        exp_alerts:
          - exp_labels: {instance: "h:8080", job: p4netem, severity: warning}
            exp_annotations: {summary: "p4netem h:8080: the switch's own metrics (--switch-metrics) do not answer"}
      - eval_time: 35s
        alertname: P4netemSwitchDown
        exp_alerts: []
  - interval: 5s
    input_series:
      - series: 'p4netem_switch_heartbeat_age_seconds{instance="h:8080",job="p4netem",thread="dataplane"}'
        values: '0.1 0.1 0.1'
      - series: 'p4netem_switch_heartbeat_age_seconds{instance="h:8080",job="p4netem",thread="tx",port="1",iface="eth1"}'
        values: '0.5 0.5 7'
      - series: 'p4netem_switch_heartbeat_age_seconds{instance="h:8080",job="p4netem",thread="tx",port="2",iface="eth2"}'
        values: '0.5 0.5 0.5'
      - series: 'p4netem_switch_heartbeat_timeout_seconds{instance="h:8080",job="p4netem"}'
        values: '3 3 3'
    alert_rule_test:
      - eval_time: 10s
        alertname: P4netemDataPlaneStalled
        exp_alerts:
          - exp_labels: {instance: "h:8080", job: p4netem, thread: tx, port: "1", iface: eth1, severity: critical}
            exp_annotations: {summary: "p4netem h:8080: data-plane thread tx (eth1) has not run for 7s"}
"""


def test_alert_rules_pass_promtool(tmp_path):
    """docs/prometheus-alerts.yml as Prometheus's own tool reads it: valid rules, and each alert
    fires for what it is about, once per stalled thread, on series that carry a scrape's labels."""
    if shutil.which("promtool") is None:
        pytest.fail("promtool is missing: `make setup` installs it (scripts/setup-system.sh)", pytrace=False)
    r = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    tests = tmp_path / "alerts-test.yml"
    tests.write_text(ALERT_TESTS.replace("RULES", str(ALERTS)))
    r = subprocess.run(["promtool", "test", "rules", str(tests)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def _by_thread(prom: Prometheus, expr: str) -> dict[str, float]:
    """An instant query's value per `thread` label (the heartbeat panel's legend)."""
    answer = prom.api("query", query=expr)
    assert answer["status"] == "success", (expr, answer)
    return {s["metric"].get("thread", ""): float(s["value"][1]) for s in answer["data"]["result"]}


def _stall_alerts(prom: Prometheus) -> list[dict]:
    return [a for a in prom.api("alerts")["data"]["alerts"] if a["labels"]["alertname"] == "P4netemDataPlaneStalled"]


def _until(what: str, check, within: float = STALL_WAIT_S):
    return until(what, check, within, every=0.5)


def test_a_stalled_data_plane_shows_on_the_dashboard_and_fires_the_alert(health_lab, prometheus_of, tmp_path):
    """The data-plane thread really stopped (ptrace, tests/thread_stop.py) while P4Runtime and the
    metrics answer: Prometheus, scraping the web server as documented, has its heartbeat age above
    the timeout in the dashboard's heartbeat panel, and fires docs/prometheus-alerts.yml's
    P4netemDataPlaneStalled for that thread; once it runs again, the age is back under the timeout
    and the alert is gone."""
    from thread_stop import stopped_thread, thread_ids

    lab, switch_metrics = health_lab
    port, prom = prometheus_of["alerts"]    # the doc's scrape configuration and the alert rules
    web = WebServer(lab.switch.grpc_addr, "--token", TOKEN, "--switch-metrics", switch_metrics,
                    log=tmp_path / "web.log", port=port)
    try:
        dashboard = json.loads((DOCS / "grafana-p4netem.json").read_text())
        (panel,) = [p for p in dashboard["panels"] if p["title"] == HEARTBEAT_PANEL]
        age_expr, timeout_expr = (_grafana_expr(t["expr"], 4 * SCRAPE_S) for t in panel["targets"])
        prom.wait_for("p4netem_switch_heartbeat_age_seconds", after=time.time())
        (timeout,) = _by_thread(prom, timeout_expr).values()
        assert timeout == 3.0  # the switch's default --heartbeat-timeout-ms
        ages = _by_thread(prom, age_expr)
        assert list(ages) == ["dataplane"] and ages["dataplane"] < timeout, ages
        rules = prom.api("rules")["data"]["groups"]
        assert [r["name"] for g in rules for r in g["rules"]][0] == "P4netemDataPlaneStalled", rules
        assert _stall_alerts(prom) == []

        pid = lab.switch.proc.pid
        (tid,) = thread_ids(pid, "p4netem-dp")
        t_stop = time.time()
        with stopped_thread(pid, tid):
            stalled = _until("the panel's dataplane age above the timeout",
                             lambda: (a := _by_thread(prom, age_expr)).get("dataplane", 0) > timeout and a)
            alerts = _until("P4netemDataPlaneStalled firing",
                            lambda: [a for a in _stall_alerts(prom) if a["state"] == "firing"])
            t_stalled = time.time()
        assert [a["labels"]["thread"] for a in alerts] == ["dataplane"], alerts
        assert "data-plane thread dataplane has not run for" in alerts[0]["annotations"]["summary"], alerts
        assert stalled["dataplane"] > timeout, stalled
        # The panel over the stall as Grafana draws it (a range query): the line climbs past the
        # timeout line.
        answer = prom.api("query_range", query=age_expr, start=t_stop, end=t_stalled, step=SCRAPE_S)
        line = [float(v) for s in answer["data"]["result"] if s["metric"]["thread"] == "dataplane"
                for _, v in s["values"]]
        assert max(line) > timeout and min(line) < timeout, line

        _until("the panel's dataplane age under the timeout again",
               lambda: 0 <= _by_thread(prom, age_expr).get("dataplane", -1) < timeout)
        _until("P4netemDataPlaneStalled resolved", lambda: _stall_alerts(prom) == [])
    finally:
        web.stop()
