"""The REST API and /metrics of `p4netem web` (issue 12 items 2, 3) against a real switch with
traffic: every write is read back over P4Runtime by a separate read-only controller; /metrics is
parsed with the Prometheus text parser and its counters move with the traffic."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from p4netem.control import Controller

from webserver import WebServer

TOKEN = "s3cret-operator-token"


@pytest.fixture
def web(lab, tmp_path):
    server = WebServer(lab.switch.grpc_addr, log=tmp_path / "web.log")
    try:
        status, _ = server.request("POST", "/api/reset", {})
        assert status == 200
        yield server
    finally:
        server.stop()


def _on_switch(lab) -> dict[str, dict]:
    """What the switch holds, read over P4Runtime by a controller of our own (no election)."""
    with Controller.connect(lab.switch.grpc_addr, primary=False) as reader:
        return {a.rule.describe(): a.to_dict() for a in reader.applied()}


def test_rest_round_trips_read_back_over_p4runtime(lab, web):
    status, body = web.request("POST", "/api/apply", {"profile": "lte", "rules": ["client=10.0.0.1"]})
    assert status == 200, body
    (rule,) = _on_switch(lab).values()
    assert rule["profile"] == "lte" and rule["rule"]["client"] == "10.0.0.1"

    status, body = web.request("POST", "/api/set", {"changes": {"downlink.delay": "77ms"}, "rules": ["client=10.0.0.1"]})
    assert status == 200, body
    (rule,) = _on_switch(lab).values()
    assert rule["downlink"]["delay"] == "77ms" and [m.split(":")[0] for m in rule["modified"]] == ["downlink.delay"]

    status, shown = web.request("GET", "/api/show")
    assert status == 200 and [r["profile"] for r in shown["rules"]] == ["lte"]

    # Bad input: the validator's field-named message, nothing written.
    status, body = web.request("POST", "/api/set", {"changes": {"downlink.rate": "-3Mbit"}, "rules": ["client=10.0.0.1"]})
    assert status == 422 and "downlink.rate" in body["error"], body
    assert _on_switch(lab)[next(iter(_on_switch(lab)))]["downlink"]["delay"] == "77ms"
    status, body = web.request("POST", "/api/apply", {"profile": "no-such-profile"})
    assert status == 422 and "no-such-profile" in body["error"], body
    # A timeline is checked before the answer, as the CLI checks it before its first change.
    status, body = web.request("POST", "/api/timelines", {"yaml": "steps:\n  - apply: no-such-profile\n"})
    assert status == 422 and "steps[0].apply" in body["error"] and "no-such-profile" in body["error"], body
    status, body = web.request("GET", "/api/timelines")
    assert status == 200 and not body["running"] and body["error"] is None, body

    status, body = web.request("POST", "/api/reset", {"rules": ["client=10.0.0.1"]})
    assert status == 200 and body["removed"] == 1
    assert _on_switch(lab) == {}


def test_profiles_list_show_validate_upload(lab, web):
    status, profiles = web.request("GET", "/api/profiles")
    assert status == 200 and {"lte", "gprs", "lan"} <= {p["name"] for p in profiles}
    status, lte = web.request("GET", "/api/profiles/lte")
    assert status == 200 and lte["name"] == "lte"
    assert web.request("GET", "/api/profiles/nope")[0] == 404

    bad = "name: broken\nboth:\n  delay: 30 parsecs\n  loss: 150%\n"
    status, v = web.request("POST", "/api/profiles/validate", {"yaml": bad})
    assert status == 200 and not v["valid"]
    assert {p["path"] for p in v["problems"]} >= {"both.delay", "both.loss"}, v
    status, body = web.request("POST", "/api/profiles", {"yaml": bad})
    assert status == 422 and body["problems"]

    good = "name: my-link\nboth:\n  delay: 31ms\n  rate: 5Mbit\n"
    assert web.request("POST", "/api/profiles/validate", {"yaml": good})[1]["valid"]
    # Open without a token: a huge document is refused before the loader spends minutes on it.
    many = "profiles:\n" + "".join(f"  - {{name: p{i}, both: {{delay: 1ms}}}}\n" for i in range(40_000))
    status, body = web.request("POST", "/api/profiles/validate", {"yaml": many})
    assert status == 413 and "at most 1048576" in body["error"], body
    assert web.request("POST", "/api/profiles", {"yaml": good})[0] == 201
    status, body = web.request("POST", "/api/apply", {"profile": "my-link"})
    assert status == 200, body
    (rule,) = _on_switch(lab).values()  # our reader does not know the name, the parameters are there
    assert rule["downlink"]["delay"] == "31ms" and rule["uplink"]["rate"] == "5Mbit"
    assert [r["profile"] for r in web.request("GET", "/api/show")[1]["rules"]] == ["my-link"]


def test_openapi_describes_the_api(web):
    status, spec = web.request("GET", "/openapi.json")
    assert status == 200
    for path in ("/api/profiles", "/api/profiles/validate", "/api/apply", "/api/set", "/api/reset", "/api/show",
                 "/api/stats", "/api/radio", "/api/timelines", "/api/self"):
        assert path in spec["paths"], path


def _metrics(web) -> dict[tuple, float]:
    status, text = web.request("GET", "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _sample(metrics: dict, name: str, **labels: str) -> float:
    hits = [v for (n, ls), v in metrics.items() if n == name and all(dict(ls).get(k) == v2 for k, v2 in labels.items())]
    assert len(hits) == 1, (name, labels, [k for k in metrics if k[0] == name])
    return hits[0]


def test_metrics_move_with_traffic(lab, web):
    assert web.request("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})[0] == 200
    before = _metrics(web)
    assert _sample(before, "p4netem_switch_up") == 1
    up_before = _sample(before, "p4netem_packets_in_total", rule="#1", direction="uplink", profile="lan")
    lab.h1.ns.run(["ping", "-c", "20", "-i", "0.02", "-q", lab.h2.ip], timeout=60)
    after = _metrics(web)
    up_after = _sample(after, "p4netem_packets_in_total", rule="#1", direction="uplink", profile="lan")
    down_after = _sample(after, "p4netem_packets_out_total", rule="#1", direction="downlink", profile="lan")
    assert up_after - up_before >= 20 and down_after >= 20
    assert _sample(after, "p4netem_bytes_in_total", rule="#1", direction="uplink", profile="lan") >= 20 * 84
    assert _sample(after, "p4netem_queue_packets", rule="#1", direction="uplink", profile="lan") >= 0
    # Drops by reason: a loss profile drops, and the reason's counter says so.
    assert web.request("POST", "/api/set", {"changes": {"uplink.loss": "50%"}, "rules": ["client=10.0.0.1"]})[0] == 200
    lab.h1.ns.run(["ping", "-c", "40", "-i", "0.02", "-q", lab.h2.ip], check=False, timeout=60)
    dropped = _sample(_metrics(web), "p4netem_dropped_packets_total", rule="#1", direction="uplink",
                      reason="loss_random")
    assert 5 <= dropped <= 35  # 40 draws at 50 %: far outside 3 sigma (10) of 20 would be a bug
    # The Grafana dashboard in docs asks only for metrics the server exports (the switch's own
    # heartbeats only with --switch-metrics, which this server lacks: test_prometheus_grafana.py
    # checks that panel against a switch that serves them).
    text = web.request("GET", "/metrics")[1]
    grafana = (Path(__file__).resolve().parents[2] / "docs" / "grafana-p4netem.json").read_text()
    for name in set(re.findall(r"p4netem_[a-z_]+", grafana)) - {"p4netem_switch_heartbeat_age_seconds",
                                                                "p4netem_switch_heartbeat_timeout_seconds"}:
        assert f"# TYPE {name} " in text, name


def test_token_guards_operator_actions_and_self_service_touches_only_the_callers_rule(lab, tmp_path):
    server = WebServer(lab.switch.grpc_addr, "--token", TOKEN, log=tmp_path / "web-token.log")
    try:
        assert server.request("POST", "/api/reset", {}, token=TOKEN)[0] == 200
        assert server.request("POST", "/api/apply", {"profile": "gprs", "rules": ["client=10.0.0.1"]}, token=TOKEN)[0] == 200
        for method, path, body in (("GET", "/api/show", None), ("POST", "/api/reset", {}), ("GET", "/metrics", None),
                                   ("POST", "/api/apply", {"profile": "lan"}), ("GET", "/api/stats", None)):
            status, answer = server.request(method, path, body)
            assert status == 401 and "token" in answer["error"], (path, answer)
            assert server.request(method, path, body, token="wrong")[0] == 401, path
        # Anyone may list profiles and shape the traffic of the address the request came from.
        assert server.request("GET", "/api/profiles")[0] == 200
        status, me = server.request("PUT", "/api/self", {"profile": "hspa"})
        assert status == 200 and me["address"] == "127.0.0.1", me
        rules = _on_switch(lab)
        assert {r["rule"]["client"]: r["profile"] for r in rules.values()} == {"10.0.0.1": "gprs", "127.0.0.1": "hspa"}
        status, me = server.request("GET", "/api/self")
        assert status == 200 and me["rule"]["profile"] == "hspa" and me["operator"] is False
        assert server.request("DELETE", "/api/self")[1]["removed"] == 1
        assert [r["profile"] for r in _on_switch(lab).values()] == ["gprs"]  # the operator's rule stays
        assert server.request("GET", "/api/show", token=TOKEN)[0] == 200
    finally:
        server.stop()


def _raw(web, method: str, path: str, data: bytes | None, content_type: str | None = "application/json",
         headers: dict | None = None) -> tuple[int, dict]:
    """A request with a body as it is (not JSON-encoded by the helper): malformed input."""
    req = urllib.request.Request(web.base + path, data=data, method=method, headers=headers or {})
    if content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_every_error_has_the_documented_shape_and_unknown_fields_are_refused(lab, web):
    assert web.request("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})[0] == 200
    # FastAPI's own request checks answer as the validator does: 422 {"error", "problems"}.
    for data, ctype, path, words in (
            (b'{"profile": "lte"', "application/json", "", "not valid JSON"),
            (b'{"profile": "lte"}', "text/plain", "", "JSON object"),
            (b'[]', "application/json", "", "JSON object"),
            (b'{}', "application/json", "profile", "required"),
            (b'{"profile": "lte", "rules": "client=10.0.0.1"}', "application/json", "rules", "list"),
            (b'{"profile": "lte", "rules": [1]}', "application/json", "rules[0]", "string")):
        status, body = _raw(web, "POST", "/api/apply", data, ctype)
        assert status == 422 and set(body) == {"error", "problems"}, (data, body)
        assert body["problems"][0]["path"] == path and words in body["error"], (data, body)
    # A misspelt field is refused, not ignored: {"rule": ...} must not reset (or apply to) every rule.
    for path, body in (("/api/reset", {"rule": ["client=10.0.0.9"]}),
                       ("/api/apply", {"profile": "gprs", "rule": ["client=10.0.0.9"]}),
                       ("/api/set", {"changes": {"delay": "5ms"}, "rule": ["client=10.0.0.9"]})):
        status, answer = web.request("POST", path, body)
        assert status == 422 and answer["problems"] == [{"path": "rule", "message": "unknown field"}], answer
    assert [r["profile"] for r in _on_switch(lab).values()] == ["lan"]
    # 404 and 405 as {"error": ...} too.
    status, body = web.request("GET", "/api/profiles/nope")
    assert status == 404 and "nope" in body["error"] and "detail" not in body, body
    assert web.request("GET", "/api/reset")[0] == 405
    # A body larger than the server reads: 413 before it is read.
    status, body = _raw(web, "POST", "/api/profiles/validate", b"{}", headers={"Content-Length": str(65 << 20)})
    assert status == 413 and "at most" in body["error"], body


def test_set_answers_as_p4netem_set_json_and_concurrent_writes_take_turns(lab, web):
    status, applied = web.request("POST", "/api/apply", {"profile": "lan", "rules": ["client=10.0.0.1"]})
    assert status == 200
    status, changed = web.request("POST", "/api/set", {"changes": {"delay": "5ms"}, "rules": ["client=10.0.0.1"]})
    assert status == 200 and changed["added"] == 0 and changed["modified_in_place"] == 1, changed
    assert set(changed) == set(applied) == {"added", "switched", "modified_in_place", "warnings", "flip_ms", "rules"}
    # Writes of several clients at once wait for each other (409 is only for a running timeline).
    rules = [f"client=10.0.1.{i}" for i in range(1, 17)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda r: web.request("POST", "/api/apply", {"profile": "gprs", "rules": [r]}), rules))
    assert [status for status, _ in answers] == [200] * len(rules), [a for a in answers if a[0] != 200][:2]
    assert len(_on_switch(lab)) == 1 + len(rules)
    # Stop shaping with nothing shaped is not an error.
    assert web.request("DELETE", "/api/self") == (200, {"address": "127.0.0.1", "removed": 0})
    # The caller is who connects, not who a header says it is (self-service shapes that address).
    assert web.request("GET", "/api/self", headers={"X-Forwarded-For": "10.0.1.1"})[1]["address"] == "127.0.0.1"
